"""What a model expects of its input tensor and where a frame's picture goes in it: the
contract between the node that makes a model's input (preprocess) and the node whose model
takes it (infer), so that neither imports the other. Every preprocessing backend and the box
mapping use this geometry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from vapipe.pipeline.geometry import Letterbox

Placement = Literal["center", "top-left"]
Color = Literal["bgr", "rgb"]

RECT_STRIDE = 32
"""The largest stride of YOLO heads: rect inputs are multiples of it."""


@dataclass(frozen=True)
class ModelInput:
    """What the model expects of its input tensor."""

    width: int
    height: int
    color: Color
    scale: float
    placement: Placement
    dtype: np.dtype
    rect: bool = False
    """The model takes any multiple of :data:`RECT_STRIDE` up to its own size."""


@runtime_checkable
class InputModel(Protocol):
    """What a preprocess node reads of the model it makes the input of (the infer node's
    ``stages.infer.model.Model``, bound to it when the graph is built, before it loads)."""

    max_batch: int
    schedule: Any
    """Which frames the detector sees (``active``, ``due(frame)``): a skipped one gets no
    input made."""
    backend: Any

    @property
    def torch_device(self) -> Any:
        """The torch device the model runs on, None where it does not run in torch."""
        ...

    def load(self) -> LoadedModel:
        """The model, loaded (once, by whichever bound node opens first)."""
        ...


class LoadedModel(InputModel, Protocol):
    """An :class:`InputModel` once loaded: it knows its input conventions."""

    input: ModelInput


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
