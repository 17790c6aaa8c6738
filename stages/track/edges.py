"""Which tracks left the picture: the rule that lets an object that left be gone (its track
expires after ``border_lost_s`` and is continued only further along its way)."""

from __future__ import annotations

import numpy as np

from vapipe.stages.track.classes import TRACKED

_EDGE = 0.01
"""A box within this fraction of the picture's width or height of its edge touches it."""


class EdgeRules:
    """Mix-in of ``ByteTracker``: reads its ``frame_size``, ``mean``, ``state`` and
    ``last_box``."""

    frame_size: tuple[int, int] | None
    mean: np.ndarray
    state: np.ndarray
    last_box: np.ndarray

    def _left(self) -> np.ndarray:
        """Per track: whether it left the picture (its last box touched the edge, or the
        filter puts its centre past it)."""
        if self.frame_size is None:
            return np.zeros(len(self.state), bool)
        width, height = self.frame_size
        centre = self.mean[:, :2]
        past = (centre[:, 0] < 0) | (centre[:, 0] > width) | (centre[:, 1] < 0)
        return self._at_edge() | past | (centre[:, 1] > height)

    def _gone(self) -> np.ndarray:
        """Per track: lost after leaving the picture."""
        return (self.state != TRACKED) & self._left()

    def _at_edge(self) -> np.ndarray:
        """Per track: whether its last seen box touched the picture's edge."""
        if self.frame_size is None:
            return np.zeros(len(self.state), bool)
        width, height = self.frame_size
        x0, y0, x1, y1 = self.last_box.T
        return (
            (x0 <= _EDGE * width)
            | (y0 <= _EDGE * height)
            | (x1 >= (1 - _EDGE) * width)
            | (y1 >= (1 - _EDGE) * height)
        )
