"""The ``motion`` node: a cheap per-source motion detector in front of the detector.

Each frame's luma is shrunk to ``width`` pixels across and blurred, and compared with the
previous one of its source: where more than ``min_area`` of the picture changed by more than
``threshold`` grey levels, something moved and the frame goes to the detector as usual. A
frame where nothing moved is flagged ``predicted`` and the infer node skips it (as for
``infer.interval``); after a track node its detections are the tracks held where they were
last seen, so an object standing in a zone keeps its dwell running and no ``zone_exit`` comes
of the detector resting. ``max_skip_s`` still detects on a still picture now and then (light
changes slowly; a parked car is still a car).

Link it before preprocessing: ``cam ! motion ! pre ! det ! nms ! track ! analytics``.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any

import cv2
import numpy as np
from pydantic import Field

from vapipe.pipeline.frame import Frame, Message, Motion
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext

Point = Annotated[list[Annotated[float, Field(strict=False)]], Field(min_length=2, max_length=2)]


class MotionConfig(StageConfig):
    """How much change counts as motion, and how long a still picture may go undetected."""

    width: int = Field(160, ge=16, le=1920)
    """Width in pixels of the grey copy compared (its height keeps the aspect)."""
    threshold: int = Field(15, ge=1, le=255)
    """A pixel changed when its grey level moved by more than this."""
    min_area: float = Field(0.002, ge=0, le=1)
    """Motion: more than this fraction of the picture changed (0.002 of 160x90: 29 pixels)."""
    ignore: list[Annotated[list[Point], Field(min_length=3)]] = Field(default_factory=list)
    """Polygons where change is not motion (a tree in the wind, a screen, a road beyond the
    door): ``[[[x, y], ...], ...]`` in frame pixels, or fractions of the frame with
    ``normalized = true``. ``min_area`` is then a fraction of the rest of the picture."""
    normalized: bool = False
    """``ignore`` polygons are given as fractions (0-1) of the frame's width and height."""
    show: bool = False
    """Keep each frame's motion mask (the changed pixels outside ``ignore``) for the video
    sink and the service's preview, which tint it red and label skipped frames ``still``."""
    max_skip_s: float = Field(2.0, ge=0)
    """Detect at least once per this many seconds of stream time, motion or not (0: every
    still frame is skipped until something moves)."""


@register("motion")
class MotionStage(Stage):
    """Flags frames where nothing moved since the source's previous frame as ``predicted``:
    the infer node after it skips them."""

    Config = MotionConfig
    config: MotionConfig
    moving = still = 0

    def open(self, context: StageContext) -> None:
        self._previous: dict[str, np.ndarray] = {}
        self._detected_at: dict[str, float] = {}
        self._masks: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        self._lock = threading.Lock()
        self.moving = self.still = 0

    def process(self, frame: Frame) -> tuple[Frame]:
        small = self._grey(frame)
        with self._lock:
            previous = self._previous.get(frame.source_id)
            self._previous[frame.source_id] = small
            last = self._detected_at.get(frame.source_id)
            fresh = previous is None or previous.shape != small.shape
            changed = None if previous is None or fresh else self._changed(previous, small, frame)
            moved = fresh or self._moved(changed, frame)
            overdue = (
                last is None or frame.pts < last or frame.pts - last >= self.config.max_skip_s > 0
            )
            still = not (moved or overdue)
            if still:
                frame.predicted = True
                self.still += 1
            else:
                self._detected_at[frame.source_id] = frame.pts
                self.moving += 1
            shown = self.config.show
            frame.motion = Motion(still, changed if shown else None, shown)
        return (frame,)

    def _grey(self, frame: Frame) -> np.ndarray:
        # The luma plane as decoded, read in the decoder's buffer: no colour conversion, and
        # no whole-picture array for a frame the detector then skips.
        luma = frame.luma()
        if luma is None:
            luma = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
        height = max(1, round(luma.shape[0] * self.config.width / luma.shape[1]))
        small = cv2.resize(luma, (self.config.width, height), interpolation=cv2.INTER_AREA)
        return cv2.GaussianBlur(small, (5, 5), 0)

    def _changed(self, previous: np.ndarray, current: np.ndarray, source: Frame) -> np.ndarray:
        """The pixels of the grey copy that changed, outside the ``ignore`` polygons."""
        changed = cv2.absdiff(previous, current) > self.config.threshold
        watched = self._watched(source, changed.shape)
        if watched is not None:
            changed &= watched
        return changed

    def _moved(self, changed: np.ndarray | None, source: Frame) -> bool:
        if changed is None:
            return True
        watched = self._watched(source, changed.shape)
        area = changed.size if watched is None else np.count_nonzero(watched)
        return bool(np.count_nonzero(changed) > self.config.min_area * area)

    def _watched(self, frame: Frame, shape: tuple[int, ...]) -> np.ndarray | None:
        """Where change counts, at the compared size (None: everywhere); per source, made
        once from the ``ignore`` polygons."""
        if not self.config.ignore:
            return None
        key = (frame.source_id, shape)
        mask = self._masks.get(key)
        if mask is None:
            height, width = frame.shape[:2]
            sx, sy = (shape[1], shape[0]) if self.config.normalized else (
                shape[1] / width, shape[0] / height)  # fmt: skip
            mask = np.full(shape, 255, np.uint8)
            polygons = [np.round(np.array(p, np.float64) * (sx, sy)).astype(np.int32)
                        for p in self.config.ignore]  # fmt: skip
            cv2.fillPoly(mask, polygons, 0)
            mask = self._masks[key] = mask.astype(bool)
        return mask

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind in ("source_removed", "source_up"):  # a new picture starts over
            with self._lock:
                self._previous.pop(message.source_id, None)
        return (message,)

    def stats(self) -> dict[str, Any]:
        return {
            "moving_frames": self.moving,
            "still_frames": self.still,
        }
