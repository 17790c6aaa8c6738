"""Boxes, labels, track trails, zones and lines drawn on a copy of the frame."""

from __future__ import annotations

import colorsys
from collections import deque
from typing import TYPE_CHECKING

import cv2
import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.object_results import BoxesInside, ObjectResult
from vapipe.stages.media.text import put_text, text_size

if TYPE_CHECKING:
    from vapipe.pipeline.frame import Frame, FrameAnalytics


def class_color(class_id: int) -> tuple[int, int, int]:
    """A stable, well-spread BGR colour per class (golden-ratio hue steps)."""
    hue = (class_id * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.95)
    return int(b * 255), int(g * 255), int(r * 255)


def draw_detections(
    image: np.ndarray,
    detections: Detections | None,
    *,
    thickness: int = 2,
    font_scale: float = 0.5,
    labels: bool = True,
) -> np.ndarray:
    canvas = image.copy()
    if detections is None:
        return canvas
    placed: list[tuple[int, int, int, int]] = []  # labels drawn so far: the next avoids them
    for index in range(len(detections)):
        x1, y1, x2, y2 = (round(float(v)) for v in detections.xyxy[index])
        class_id = int(detections.class_id[index])
        track = -1 if detections.track_id is None else int(detections.track_id[index])
        color = class_color(track if track >= 0 else class_id)
        cv2.rectangle(canvas, (x1, y1), (x2, y2), color, thickness, cv2.LINE_AA)
        held = detections.attributes[index] if detections.attributes is not None else None
        for value in (held or {}).values():  # boxes a model found inside the object
            for inner in value.boxes if isinstance(value, BoxesInside) else ():
                a, b, c, d = (round(float(v)) for v in inner.xyxy)
                cv2.rectangle(canvas, (a, b), (c, d), color, max(1, thickness - 1), cv2.LINE_AA)
        if not labels:
            continue
        text = f"{detections.class_name(class_id)} {detections.score[index]:.2f}"
        if track >= 0:
            text = f"#{track} {text}"
        tags = attribute_tags(held)
        if tags:
            text = f"{text} {tags}"
        (tw, th), base = text_size(text, font_scale)
        height = th + base + 2
        top = label_top(x1, tw + 4, height, (y1, y2), canvas.shape[0], placed)
        placed.append((x1, top, x1 + tw + 4, top + height))
        cv2.rectangle(canvas, (x1, top), (x1 + tw + 4, top + height), color, cv2.FILLED)
        put_text(canvas, text, (x1 + 2, top + th + 1), font_scale, (0, 0, 0))
    return canvas


def label_top(
    x: int,
    width: int,
    height: int,
    box_y: tuple[int, int],
    image_height: int,
    placed: list[tuple[int, int, int, int]],
) -> int:
    """Where a box's label goes: above the box, else just inside its top, below it, or just
    inside its bottom, the first that covers no label already drawn (in a crowd, neighbours'
    labels would stack on one another); above it when every place is taken."""
    y1, y2 = box_y
    tops = [y1 - height, y1, y2, y2 - height]
    tops = [min(max(top, 0), max(image_height - height, 0)) for top in tops]
    for top in tops:
        if not any(
            x < right and left < x + width and top < bottom and upper < top + height
            for left, upper, right, bottom in placed
        ):
            return top
    return tops[0]


def attribute_tags(attributes: dict[str, ObjectResult] | None) -> str:
    """What models on the object said, as a box's label shows it: labels and names."""
    return " ".join(value.caption for value in (attributes or {}).values() if value.caption)


def draw_trails(canvas: np.ndarray, trails: dict[int, list[tuple[int, int]]]) -> None:
    """Each track's recent bottom-centre points as a fading polyline, in its id's colour."""
    for track_id, points in trails.items():
        color = class_color(track_id)
        for index in range(1, len(points)):
            weight = max(1, round(2 * index / len(points)))
            cv2.line(canvas, points[index - 1], points[index], color, weight, cv2.LINE_AA)


def draw_analytics(canvas: np.ndarray, analytics: FrameAnalytics) -> None:
    """Zones filled translucent with their occupancy, lines with their counts."""
    summary = analytics.summary
    overlay = canvas.copy()
    for zone in analytics.zones:
        corners = np.asarray(zone.polygon.exterior.coords, np.int32)[:-1]
        occupancy = summary["zones"][zone.config.name]["occupancy"]
        limit = zone.config.max_objects
        color = (0, 0, 230) if limit is not None and occupancy > limit else (230, 160, 0)
        cv2.fillPoly(overlay, [corners], color)
        cv2.polylines(canvas, [corners], True, color, 2, cv2.LINE_AA)
    cv2.addWeighted(overlay, 0.25, canvas, 0.75, 0, dst=canvas)
    for zone in analytics.zones:
        x, y = np.asarray(zone.polygon.exterior.coords, np.int32).min(axis=0)
        occupancy = summary["zones"][zone.config.name]["occupancy"]
        _label(canvas, f"{zone.config.name}: {occupancy}", (int(x) + 4, int(y) + 18))
    for line in analytics.lines:
        start, end = tuple(line.start.astype(int)), tuple(line.end.astype(int))
        cv2.line(canvas, start, end, (0, 220, 255), 2, cv2.LINE_AA)
        counts = summary["lines"][line.config.name]
        text = " ".join(f"{label} {counts[label]}" for label in line.counts)
        _label(canvas, f"{line.config.name}: {text}", (start[0] + 4, start[1] + 18))


def _label(canvas: np.ndarray, text: str, origin: tuple[int, int]) -> None:
    """White text on a dark box, readable on any background."""
    (width, height), base = text_size(text, 0.5)
    x, y = max(origin[0], 0), max(origin[1], height + 2)
    cv2.rectangle(canvas, (x - 2, y - height - 2), (x + width + 2, y + base), (0, 0, 0), -1)
    put_text(canvas, text, (x, y), 0.5, (255, 255, 255))


class Trails:
    """The last few anchor points (bottom centre) of each track of one source."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.points: dict[int, deque[tuple[int, int]]] = {}
        self.idle: dict[int, int] = {}

    def update(self, dets: Detections) -> dict[int, list[tuple[int, int]]]:
        seen = set()
        if dets.track_id is not None:
            for box, track_id in zip(dets.xyxy, dets.track_id.tolist(), strict=True):
                if track_id < 0:
                    continue
                trail = self.points.setdefault(track_id, deque(maxlen=self.length))
                trail.append((round(float(box[0] + box[2]) / 2), round(float(box[3]))))
                seen.add(track_id)
        for track_id in list(self.points):  # a track gone for a whole trail's length is dropped
            self.idle[track_id] = 0 if track_id in seen else self.idle.get(track_id, 0) + 1
            if self.idle[track_id] > self.length:
                del self.points[track_id], self.idle[track_id]
        return {track_id: list(points) for track_id, points in self.points.items()}


def annotate(
    frame: Frame,
    *,
    thickness: int = 2,
    font_scale: float = 0.5,
    labels: bool = True,
    trails: Trails | None = None,
) -> np.ndarray:
    """The frame as the video sink records it (and the service previews it): boxes with
    labels, the tracks' trails when kept, and the analytics' lines and zones with counts."""
    picture = draw_detections(
        frame.image, frame.detections, thickness=thickness, font_scale=font_scale, labels=labels
    )
    if trails is not None and frame.detections is not None:
        draw_trails(picture, trails.update(frame.detections))
    if frame.analytics is not None:
        draw_analytics(picture, frame.analytics)
    if frame.motion is not None and frame.motion.shown:
        draw_motion(picture, frame.motion.mask, still=frame.motion.still)
    return picture


MOTION_TINT = np.array((0, 0, 255), np.float32)  # BGR red


def draw_motion(canvas: np.ndarray, mask: np.ndarray | None, *, still: bool) -> None:
    """The motion node's changed pixels (``show = true``) tinted red, scaled up from the grey
    copy it compared; a frame it let the detector skip is labelled ``still``."""
    if mask is not None and mask.any():
        height, width = canvas.shape[:2]
        full = cv2.resize(mask.astype(np.uint8), (width, height), interpolation=cv2.INTER_NEAREST)
        moving = full.astype(bool)
        canvas[moving] = (canvas[moving] * 0.55 + MOTION_TINT * 0.45).astype(np.uint8)
    if still:
        _label(canvas, "still", (4, canvas.shape[0] - 6))


def annotated_jpeg(frame: Frame, width: int, quality: int = 80) -> bytes:
    """The frame annotated as the video sink draws it, at most ``width`` wide, as JPEG (the
    service's previews, Home Assistant's camera)."""
    picture = annotate(frame)
    height, full = picture.shape[:2]
    if full > width:
        size = (width, max(2, round(height * width / full)))
        picture = cv2.resize(picture, size, interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(
        ".jpg", np.ascontiguousarray(picture), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return encoded.tobytes()
