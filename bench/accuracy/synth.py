"""Generated sequences with exact truth: cut-outs of real cars, a real pedestrian and a real
dog, taken from the sample media, moved on known paths over the real (empty) road of
traffic.mp4 (the scenes themselves: scenes.py).

Each scene writes an H.264 clip (the detector then runs on it like on any file) and its truth:
every object's box per frame, every line crossing (with the object's class) and every zone
visit, derived from the paths with the same geometry the analytics use. A scene may also add
boxes a weaker detector would give (fragments: part of an object, or a duplicate of it), so
that the rule against them is tested on every model alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import av
import cv2
import numpy as np
import shapely

from vapipe.pipeline.detections import Detections
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.geometry import compile_geometry
from vapipe.stages.nms import NmsConfig, nms

WIDTH, HEIGHT, FPS = 640, 360, 24
LINE = {"name": "road", "start": [320, 20], "end": [320, 340]}
CROSSED_PX = 20
"""A crossing, for the truth, goes from this far on one side to this far on the other (the
frame is where it passed the line): someone wandering a few pixels either side of the line is
walking along it, not crossing it."""
NMS_IOU = NmsConfig.model_fields["iou"].default
"""The pipeline's NMS overlap, which the detections were cached through."""
ZONE = {"name": "bay", "polygon": [[420, 110], [600, 110], [600, 330], [420, 330]]}
# Cut-outs: (clip, frame, x1, y1, x2, y2), boxes from bench/accuracy/labels/traffic_boxes.csv.
CROPS = {
    "blue": ("traffic", 200, 406, 148, 560, 214),  # eastbound, facing right; scored 0.81
    "black": ("traffic", 200, 2, 213, 153, 296),  # 0.69
    "white": ("traffic", 200, 100, 143, 254, 208),  # 0.47
    "silver": ("traffic", 30, 144, 224, 290, 285),  # 0.43 car, 0.38 truck: a weak one
    "west": ("traffic", 200, 432, 23, 574, 87),  # westbound, facing left; 0.78
    "grey": ("traffic", 200, 48, 27, 174, 82),  # westbound; 0.82
    "pickup": ("traffic", 436, 227, 5, 420, 80),  # westbound; called truck 0.41 or car 0.18
    "person": ("people", 0, 662, 201, 757, 444),  # parts of two neighbours at its sides
    "person2": ("people", 0, 278, 217, 380, 447),  # likewise; YOLOX-Nano 0.74
    "horse": ("horses", 0, 180, 282, 301, 361),  # the white one, galloping right; 0.71
    "dog": ("dog.jpg", 0, 130, 220, 312, 545),  # sitting, facing the camera
}


@dataclass
class Mover:
    """One object: a cut-out and its top-left corner per frame (None: not in the scene)."""

    crop: str
    path: list[tuple[float, float] | None]
    flip: bool = False
    height: int | None = None
    """Scale the cut-out to this height (pixels)."""
    contrast: float = 1.0
    """1: as cut; lower blends it towards the road."""
    blur: int = 0
    """Horizontal motion blur kernel (pixels)."""
    over: bool = False
    """Pasted last: hides the others where they overlap."""
    label: str = ""
    """Its COCO class name: set in scenes whose crossings are scored by class too."""
    hue: int = 0
    """Its colours' hue turned by this much (OpenCV's 0-180 scale): the same cut-out in
    other clothes, for scenes where people must be told apart by their looks."""


@dataclass
class Fragment:
    """An extra detection on part of a mover's visible box (fractions of its width and
    height) in some frames, of a class at a score: the sleeve, head or duplicate box that a
    weak detector gives next to the object's own."""

    mover: int
    """Index into the scene's movers."""
    frames: range
    inside: tuple[float, float, float, float]
    score: float
    class_id: int


@dataclass
class Scene:
    name: str
    what: str
    frames: int
    movers: list[Mover]
    zone_dwell_s: float | None = None
    span: tuple[float, float] = (20, 340)
    """Where the line (x = 320) runs, top to bottom."""
    scale: int = 1
    """Rendered at this multiple of 640x360 (the road, cut-outs and paths scaled alike)."""
    split: str = "tuning"
    """"tuning": the settings may be chosen on it; "held-out": only scored."""
    fragments: list[Fragment] = field(default_factory=list)
    truth: dict = field(default_factory=dict)

    @property
    def size(self) -> tuple[int, int]:
        return WIDTH * self.scale, HEIGHT * self.scale

    @property
    def line(self) -> dict:
        x, (top, bottom) = LINE["start"][0], self.span
        return {**LINE, "start": [x * self.scale, top * self.scale],
                "end": [x * self.scale, bottom * self.scale]}  # fmt: skip

    @property
    def zone(self) -> dict:
        return {**ZONE, "polygon": [[x * self.scale, y * self.scale] for x, y in ZONE["polygon"]]}

    @property
    def labelled(self) -> bool:
        return any(m.label for m in self.movers)


@functools.cache
def _cutouts(media: Path) -> dict[str, np.ndarray]:
    frames: dict[tuple[str, int], np.ndarray] = {}
    for clip, index, *_ in CROPS.values():
        if clip.endswith(".jpg"):
            frames[clip, index] = cv2.imread(str(media / clip))
        elif (clip, index) not in frames:
            with av.open(str(media / f"{clip}.mp4")) as container:
                for i, frame in enumerate(container.decode(video=0)):
                    if i == index:
                        frames[clip, index] = frame.to_ndarray(format="bgr24")
                        break
    return {
        name: frames[clip, index][y1:y2, x1:x2].copy()
        for name, (clip, index, x1, y1, x2, y2) in CROPS.items()
    }


@functools.cache
def background(media: Path) -> np.ndarray:
    """The road without cars: the median of every sixth frame of traffic.mp4."""
    with av.open(str(media / "traffic.mp4")) as container:
        frames = [
            f.to_ndarray(format="bgr24") for i, f in enumerate(container.decode(video=0))
            if i % 6 == 0
        ]  # fmt: skip
    return np.median(np.stack(frames), axis=0).astype(np.uint8)


def crop_size(mover: Mover) -> tuple[float, float]:
    """The mover's width and height at scale 1."""
    _, _, x1, y1, x2, y2 = CROPS[mover.crop]
    factor = (mover.height or y2 - y1) / (y2 - y1)
    return (x2 - x1) * factor, (y2 - y1) * factor


def _look(mover: Mover, crop: np.ndarray, road: np.ndarray, scale: int) -> np.ndarray:
    image = crop[:, ::-1] if mover.flip else crop
    height = (mover.height or image.shape[0]) * scale
    if height != image.shape[0]:
        factor = height / image.shape[0]
        image = cv2.resize(image, (round(image.shape[1] * factor), height))
    if mover.hue:
        hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
        hsv[..., 0] = (hsv[..., 0].astype(np.int32) + mover.hue) % 180
        image = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    if mover.contrast != 1.0:
        grey = np.full_like(image, int(road.mean()))
        image = cv2.addWeighted(image, mover.contrast, grey, 1 - mover.contrast, 0)
    if mover.blur:
        kernel = np.full((1, mover.blur * scale), 1.0 / (mover.blur * scale), np.float32)
        image = cv2.filter2D(image, -1, kernel, borderType=cv2.BORDER_REPLICATE)
    return image


def _paste(canvas: np.ndarray, image: np.ndarray, x: float, y: float) -> tuple | None:
    """Paste at (x, y); returns the visible box (x1, y1, x2, y2), or None when off screen."""
    h, w = image.shape[:2]
    x1, y1 = round(x), round(y)
    cx1, cy1 = max(x1, 0), max(y1, 0)
    cx2, cy2 = min(x1 + w, canvas.shape[1]), min(y1 + h, canvas.shape[0])
    if cx2 - cx1 < 0.3 * w or cy2 - cy1 < 0.3 * h:
        return None  # under a third in view: the labels of the real clip skip these too
    # Feathered edges: a hard rectangle of another patch of road is a cue real cars lack.
    alpha = _feather(h, w)[cy1 - y1 : cy2 - y1, cx1 - x1 : cx2 - x1, None]
    patch = image[cy1 - y1 : cy2 - y1, cx1 - x1 : cx2 - x1].astype(np.float32)
    under = canvas[cy1:cy2, cx1:cx2].astype(np.float32)
    canvas[cy1:cy2, cx1:cx2] = (alpha * patch + (1 - alpha) * under).round().astype(np.uint8)
    return (cx1, cy1, cx2, cy2)


def _feather(h: int, w: int, edge: int = 6) -> np.ndarray:
    ramp_y = np.clip(np.minimum(np.arange(h), np.arange(h)[::-1]) / edge, 0, 1)
    ramp_x = np.clip(np.minimum(np.arange(w), np.arange(w)[::-1]) / edge, 0, 1)
    return np.minimum(ramp_y[:, None], ramp_x[None, :]).astype(np.float32)


def _truth(scene: Scene, boxes: list[list[tuple]]) -> dict:
    """Line crossings and zone visits of each object's bottom-centre anchor, from its path.
    A crossing must lie on the segment where the path meets the line (interpolated between
    the frames either side), not where the first point past it happens to be."""
    settings = AnalyticsConfig.model_validate({"lines": [scene.line], "zones": [scene.zone]})
    (line,), _ = compile_geometry(settings, "scene", *scene.size)
    anchors: dict[int, list[tuple[int, float, float]]] = {}
    for frame, rows in enumerate(boxes):
        for obj, x1, _, x2, y2 in rows:
            anchors.setdefault(obj, []).append((frame, (x1 + x2) / 2, y2))
    crossings = []
    for obj, points in anchors.items():
        signed, along = line.sides(np.array([(x, y) for _, x, y in points]))
        side, over, before = 0, None, None
        for (frame, _, _), distance, position in zip(
            points, signed.tolist(), along.tolist(), strict=True
        ):
            now = 1 if distance > 0 else -1
            if now != side and (over is None or over[1] != now):
                where = position  # came over here: a crossing if it goes on
                if before is not None and before[0] * distance < 0:
                    t = before[0] / (before[0] - distance)
                    where = before[1] + t * (position - before[1])
                over = (frame, now, where)
            if abs(distance) >= CROSSED_PX * scene.scale and now != side:
                if side and over is not None and 0 <= over[2] <= 1:
                    crossings.append(
                        {"frame": over[0], "object": obj, "line": LINE["name"],
                         "direction": "in" if now > 0 else "out",
                         "label": scene.movers[obj - 1].label}
                    )  # fmt: skip
                side, over = now, None
            before = (distance, position)
    return {"crossings": crossings, "visits": zone_visits(boxes, scene.zone["polygon"])}


def add_fragments(scene: Scene, dets: list[Detections]) -> list[Detections]:
    """The detections with the scene's fragments added (its truth must be rendered), through
    the same class-wise NMS as the detector's own boxes: a fragment overlapping a better box
    of its class by more than NMS_IOU is gone, as it would be from a real detector."""
    if not scene.fragments:
        return dets
    out = list(dets)
    for piece in scene.fragments:
        fx1, fy1, fx2, fy2 = piece.inside
        for frame in piece.frames:
            whole = [b for b in scene.truth["boxes"][frame] if b[0] == piece.mover + 1]
            if not whole:
                continue
            _, x1, y1, x2, y2 = whole[0]
            w, h = x2 - x1, y2 - y1
            box = [x1 + fx1 * w, y1 + fy1 * h, x1 + fx2 * w, y1 + fy2 * h]
            found = out[frame]
            joined = Detections(
                np.vstack([found.xyxy, np.array([box], np.float32)]),
                np.append(found.score, np.float32(piece.score)),
                np.append(found.class_id, np.int32(piece.class_id)),
                found.names,
            )
            keep = np.sort(nms(joined.xyxy, joined.score, NMS_IOU, joined.class_id))
            out[frame] = joined[keep]
    return out


def zone_visits(boxes: list[list[tuple]], polygon: list) -> list[dict]:
    """Zone visits of boxed objects: their bottom-centre inside the polygon, enter to exit
    (a frame without the object's box ends its visit: it left the picture)."""
    shape = shapely.Polygon(polygon)
    inside: dict[int, int] = {}
    found = []
    for frame, rows in enumerate(boxes):
        here = set()
        for obj, x1, _, x2, y2 in rows:
            if shape.contains(shapely.Point((x1 + x2) / 2, y2)):
                here.add(obj)
                inside.setdefault(obj, frame)
        for obj in [o for o in inside if o not in here]:
            found.append({"object": obj, "enter": inside.pop(obj), "exit": frame})
    return found + [{"object": o, "enter": f, "exit": None} for o, f in inside.items()]


def render(scene: Scene, media: Path, folder: Path) -> Path:
    """Write the scene's clip into ``folder``; fill ``scene.truth`` (boxes, crossings,
    visits). Returns the clip's path."""
    cutouts = _cutouts(media)
    road = cv2.resize(background(media), scene.size, interpolation=cv2.INTER_CUBIC)
    looks = [_look(m, cutouts[m.crop], road, scene.scale) for m in scene.movers]
    order = sorted(range(len(scene.movers)), key=lambda k: scene.movers[k].over)
    clip = folder / f"{scene.name}.mp4"
    boxes: list[list[tuple]] = []
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"crf": "18"})
        (stream.width, stream.height), stream.pix_fmt = scene.size, "yuv420p"
        for frame in range(scene.frames):
            canvas = road.copy()
            rows = []
            for k in order:
                place = scene.movers[k].path[frame]
                box = None
                if place is not None:
                    box = _paste(canvas, looks[k], place[0] * scene.scale, place[1] * scene.scale)
                if box is not None:
                    rows.append((k + 1, *box))
            boxes.append(rows)
            video = av.VideoFrame.from_ndarray(canvas, format="bgr24")
            for packet in stream.encode(video):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    scene.truth = {"boxes": boxes, **_truth(scene, boxes)}
    return clip
