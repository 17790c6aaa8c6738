"""The ``snapshots`` node: a JPEG of the annotated frame, and one of the object, for each
analytics event, written by a thread of its own. The picture of a tracked object is its
best-scored detection of the last ``best_of_s`` seconds that overlaps its box at the event
(not a guessed box between detections, nor a blurred frame caught mid-crossing). Placed
before the event sinks, it puts the files' paths in the events it pictured."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import cv2
import numpy as np
from pydantic import Field, field_validator

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.stages.media.draw import annotate
from vapipe.stages.media.files import file_stem, inside_folder, sub_folder, write_whole
from vapipe.stages.sinks.media_sink import MediaConfig, MediaSink

log = logging.getLogger(__name__)

Box = tuple[float, float, float, float]


class SnapshotsConfig(MediaConfig):
    """Where the pictures go and which events get one."""

    path: str = "snapshots/{source_id}/{date}"
    """The folder inside ``dir`` (``{source_id}``, ``{date}``: the UTC day, 2026-12-04)."""
    crop: bool = True
    """Write a picture of the object as well (``-crop.jpg``)."""
    crop_min_px: int = Field(160, ge=16, le=4096)
    """The crop's short side at least (more of the frame around a small object, scaled up
    where the frame has not enough)."""
    crop_pad: float = Field(0.15, ge=0, le=2)
    """Margin around the object's box, as a fraction of its size on each side."""
    best_of_s: float = Field(1.0, ge=0, le=30)
    """The object's best-scored detection within this many seconds before the event, among
    those overlapping its box at the event, is the picture (0: the event's own frame)."""
    quality: int = Field(85, ge=10, le=100)
    """JPEG quality."""

    _inside = field_validator("path")(inside_folder)


def crop_window(box: Box, width: int, height: int, min_px: int, pad: float) -> tuple[int, ...]:
    """The part of a ``width`` x ``height`` frame shown for ``box``: the box with ``pad`` of
    its size around it, grown about its centre to ``min_px`` a side where the frame allows,
    moved inside the frame."""
    x1, y1, x2, y2 = box
    bw, bh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
    sides = []
    for low, high, size, limit in ((x1, x2, bw, width), (y1, y2, bh, height)):
        want = min(max(size * (1 + 2 * pad), min_px), limit)
        start = (low + high) / 2 - want / 2
        start = min(max(start, 0.0), limit - want)
        sides.append((round(start), round(start + want)))
    (cx1, cx2), (cy1, cy2) = sides
    return cx1, cy1, cx2, cy2


def crop_picture(image: np.ndarray, box: Box, min_px: int, pad: float) -> np.ndarray:
    height, width = image.shape[:2]
    x1, y1, x2, y2 = crop_window(box, width, height, min_px, pad)
    crop = image[y1:y2, x1:x2]
    short = min(crop.shape[:2])
    if 0 < short < min_px:  # a frame smaller than the crop wants: scaled up instead
        scale = min_px / short
        crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
    return crop


def as_box(row: np.ndarray) -> Box:
    x1, y1, x2, y2 = (float(v) for v in row)
    return x1, y1, x2, y2


@dataclass
class Seen:
    pts: float
    score: float
    frame: Frame
    box: Box


class BestBoxes:
    """Per track of one source, its detections of the last ``window_s`` seconds."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.tracks: dict[int, deque[Seen]] = {}

    def update(self, frame: Frame) -> None:
        dets = frame.detections
        horizon = frame.pts - self.window_s
        if dets is not None and dets.track_id is not None:
            for index, track_id in enumerate(dets.track_id.tolist()):
                if track_id >= 0:
                    seen = Seen(
                        frame.pts, float(dets.score[index]), frame, as_box(dets.xyxy[index])
                    )
                    self.tracks.setdefault(track_id, deque()).append(seen)
        for track_id in list(self.tracks):  # the frames they hold go with them
            kept = self.tracks[track_id]
            while kept and kept[0].pts < horizon:
                kept.popleft()
            if not kept:
                del self.tracks[track_id]

    def best(self, track_id: int, near: Box | None = None) -> Seen | None:
        """The best-scored of the window (the latest of equals), among the boxes that overlap
        ``near`` (where the event happened) when given: the picture shows the object there."""
        kept = [s for s in self.tracks.get(track_id, ()) if near is None or overlap(s.box, near)]
        return max(reversed(kept), key=lambda seen: seen.score) if kept else None


def overlap(a: Box, b: Box) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def box_of(frame: Frame, track_id: int) -> Box | None:
    dets = frame.detections
    if dets is None or dets.track_id is None:
        return None
    found = np.flatnonzero(dets.track_id == track_id)
    return as_box(dets.xyxy[found[0]]) if len(found) else None


@dataclass
class Shot:
    frame: Frame
    box: Box | None
    picture: str
    """Relative to the media folder, like ``crop``."""
    crop: str | None
    tight: bool = False
    """Crop the box itself (a plate), scaled up to half of ``crop_min_px`` high, not a
    window of context around it."""


def tight_picture(image: np.ndarray, box: Box, min_height: int) -> np.ndarray:
    """The box with a small margin (a plate's border kept), scaled up to ``min_height``."""
    height, width = image.shape[:2]
    x1, y1, x2, y2 = box
    pad_x, pad_y = 0.08 * (x2 - x1), 0.15 * (y2 - y1)
    left, top = max(int(x1 - pad_x), 0), max(int(y1 - pad_y), 0)
    right, bottom = min(int(np.ceil(x2 + pad_x)), width), min(int(np.ceil(y2 + pad_y)), height)
    crop = image[top : max(bottom, top + 1), left : max(right, left + 1)]
    if 0 < crop.shape[0] < min_height:
        scale = min_height / crop.shape[0]
        crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    return crop


@register("snapshots")
class SnapshotsSink(MediaSink[Shot]):
    """JPEGs of what each analytics event was about; frames pass on unchanged but for the
    paths added to their events."""

    Config = SnapshotsConfig
    config: SnapshotsConfig

    def open(self, context: StageContext) -> None:
        self.open_media(self._write)
        self._best: dict[str, BestBoxes] = {}

    def process(self, frame: Frame) -> tuple[Frame]:
        best = self._best.setdefault(frame.source_id, BestBoxes(self.config.best_of_s))
        if not frame.predicted:  # a guessed box between detections is no picture of it
            best.update(frame)
        for index, event in enumerate(frame.events):
            if event["event"] in self.event_types:
                self._picture(frame, index, best)
        return (frame,)

    def _picture(self, frame: Frame, index: int, best: BestBoxes) -> None:
        event = frame.events[index]
        track_id = event.get("track_id")
        shown, box = frame, None
        tight = event.get("box") is not None  # a plate: this frame, the plate's own box
        if tight:
            x1, y1, x2, y2 = (float(v) for v in event["box"])
            box = (x1, y1, x2, y2)
        elif track_id is not None:
            box = box_of(frame, track_id)
            # Where none overlaps (the event's box a guess far off), its best of the window.
            seen = best.best(track_id, box) or best.best(track_id)
            if seen is not None:
                shown, box = seen.frame, seen.box
        folder = sub_folder(self.config.path, frame.source_id, frame.capture_time)
        stem = f"{folder}/{file_stem(frame.capture_time, frame.seq, event)}"
        crop = f"{stem}-crop.jpg" if self.config.crop and box is not None else None
        if self.submit(Shot(shown, box, f"{stem}.jpg", crop, tight)):
            files = frame.files_of(index)
            files.snapshot = f"{stem}.jpg"
            if crop is not None and box is not None:
                files.snapshot_crop = crop
                files.snapshot_box = [round(v, 2) for v in box]
                files.snapshot_seq = shown.seq

    def _encode(self, picture: np.ndarray) -> bytes:
        ok, data = cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_QUALITY, self.config.quality])
        if not ok:
            raise ConfigError("the JPEG encoder refused the picture", key="quality")
        return bytes(data)

    def _write(self, shot: Shot) -> None:
        cfg = self.config
        write_whole(self.root / shot.picture, self._encode(annotate(shot.frame)))
        self.retention.add(shot.picture)
        if shot.crop is not None and shot.box is not None:
            crop = (
                tight_picture(shot.frame.image, shot.box, cfg.crop_min_px // 2)
                if shot.tight
                else crop_picture(shot.frame.image, shot.box, cfg.crop_min_px, cfg.crop_pad)
            )
            write_whole(self.root / shot.crop, self._encode(crop))
            self.retention.add(shot.crop)

    def close(self) -> None:
        self.close_writer()
