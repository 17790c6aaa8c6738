"""Where a frame's picture went in a model's input, to map boxes back: a contract between
the stage that makes the input and the stages that read boxes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Letterbox:
    """How a frame was placed in the model input: input = frame * scale + (pad_x, pad_y)."""

    scale: float
    pad_x: int
    pad_y: int
    resized_w: int
    resized_h: int
    frame_w: int
    frame_h: int

    def to_frame(self, boxes: np.ndarray) -> np.ndarray:
        """Map xyxy boxes from model-input pixels back to frame pixels, clipped to the frame."""
        out = boxes.astype(np.float32, copy=True)
        # (x, y) pairs as rows, mapped in place: the same float32 arithmetic as column by
        # column, without the copies fancy indexing makes (this runs on every frame).
        points = out.reshape(-1, 2)
        points -= np.array((self.pad_x, self.pad_y), np.float32)
        points /= np.float32(self.scale)
        np.clip(points, 0, np.array((self.frame_w, self.frame_h), np.float32), out=points)
        return out
