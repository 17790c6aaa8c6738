"""Letterbox geometry shared by every preprocessing backend and by box mapping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Placement = Literal["center", "top-left"]
Color = Literal["bgr", "rgb"]


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


def letterbox_for(
    frame_w: int, frame_h: int, input_w: int, input_h: int, placement: Placement
) -> Letterbox:
    """The fit that keeps the aspect ratio. Rounding follows the reference implementations:
    Ultralytics rounds the resized size and centres with ``round(pad - 0.1)``; YOLOX
    truncates the resized size and places the picture top-left."""
    scale = min(input_w / frame_w, input_h / frame_h)
    if placement == "center":
        resized_w, resized_h = round(frame_w * scale), round(frame_h * scale)
        pad_x = round((input_w - resized_w) / 2 - 0.1)
        pad_y = round((input_h - resized_h) / 2 - 0.1)
    else:
        resized_w, resized_h = int(frame_w * scale), int(frame_h * scale)
        pad_x = pad_y = 0
    # A picture 1000 times wider than high still keeps one row (10000x10 into 416x416).
    resized_w, resized_h = max(1, resized_w), max(1, resized_h)
    return Letterbox(scale, pad_x, pad_y, resized_w, resized_h, frame_w, frame_h)


def rect_size(
    frame_w: int, frame_h: int, input_w: int, input_h: int, placement: Placement, stride: int
) -> tuple[int, int]:
    """The smallest input, in multiples of ``stride`` and within ``input_w`` x ``input_h``,
    that holds the frame at the scale the full input would give it (rectangular inference)."""
    box = letterbox_for(frame_w, frame_h, input_w, input_h, placement)
    width = min(input_w, -(-box.resized_w // stride) * stride)
    height = min(input_h, -(-box.resized_h // stride) * stride)
    return width, height
