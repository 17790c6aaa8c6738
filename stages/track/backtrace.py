"""Where a new track's object was before it was sure: its path traced back through the boxes
no track held (scores under ``new_track_score``, a tentative track's), so that a line the
object crossed while the detector was unsure of it still counts.

A car that the detector scores 0.15-0.25 for half a second and 0.4 only once it is past a
line is first *identified* past the line; without its earlier boxes the line never sees it
on the side it came from."""

from __future__ import annotations

from collections import deque

import numpy as np

from vapipe.stages.boxes import iou_matrix

CHAIN_IOU = 0.3
"""Least overlap between a box of the path and the next earlier one: the same object, moved
on by at most a few frames' motion."""
CHAIN_GAP_S = 0.25
"""The path ends where no box continues it for this long: further back, a box at the same
place is more likely another object than this one, missed for longer."""


class Backtrace:
    """The boxes of one source's recent detected frames that no identified track held."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.frames: deque[tuple[float, np.ndarray]] = deque()

    def origin(self, box: np.ndarray, time_s: float) -> np.ndarray | None:
        """The earliest box of the path that ends at ``box`` (now, ``time_s``), within
        ``window_s``; None if no earlier box continues it."""
        current, found_at, origin = box, time_s, None
        for seen_at, boxes in reversed(self.frames):
            if time_s - seen_at > self.window_s or found_at - seen_at > CHAIN_GAP_S:
                break
            if not len(boxes):
                continue
            overlap = iou_matrix(current[None, :], boxes)[0]
            best = int(overlap.argmax())
            if overlap[best] >= CHAIN_IOU:
                current, found_at = boxes[best], seen_at
                origin = current
        return None if origin is None else origin.copy()

    def add(self, boxes: np.ndarray, time_s: float) -> None:
        """This detected frame's boxes that no identified track held."""
        if self.window_s <= 0:
            return
        self.frames.append((time_s, np.asarray(boxes, np.float64).reshape(-1, 4)))
        while self.frames and time_s - self.frames[0][0] > self.window_s:
            self.frames.popleft()
