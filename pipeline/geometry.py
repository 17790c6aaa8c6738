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
        out[:, [0, 2]] = (out[:, [0, 2]] - self.pad_x) / self.scale
        out[:, [1, 3]] = (out[:, [1, 3]] - self.pad_y) / self.scale
        out[:, [0, 2]] = np.clip(out[:, [0, 2]], 0, self.frame_w)
        out[:, [1, 3]] = np.clip(out[:, [1, 3]], 0, self.frame_h)
        return out
