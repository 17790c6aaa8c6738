"""Letterbox geometry shared by every preprocessing backend and by box mapping."""

from __future__ import annotations

from typing import Literal

from vapipe.pipeline.geometry import Letterbox

Placement = Literal["center", "top-left"]
Color = Literal["bgr", "rgb"]


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
