"""Decoders for the common YOLO output layouts, and detection of which one a model has.

Every decoder returns, per image, candidate :class:`Detections` in model-input pixels (xyxy,
best class score, its class id). NMS and mapping back to the frame happen downstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.model_input import Color, Placement


class Family(StrEnum):
    YOLOX = "yolox"
    """(B, anchors, 5 + classes), raw grid offsets, strides 8/16/32."""
    YOLOV5 = "yolov5"
    """(B, 3 x anchors, 5 + classes): cx, cy, w, h, objectness, class scores (v5, v7)."""
    YOLOV8 = "yolov8"
    """(B, 4 + classes, anchors): cx, cy, w, h, class scores (v8, v11, v12)."""
    END2END = "end2end"
    """(B, max_det, 6): x1, y1, x2, y2, score, class, already suppressed (v10, YOLO26)."""


@dataclass(frozen=True)
class Conventions:
    """How a family expects its input tensor."""

    color: Color
    scale: float
    placement: Placement


def conventions(family: Family) -> Conventions:
    if family is Family.YOLOX:
        return Conventions(color="bgr", scale=1.0, placement="top-left")
    return Conventions(color="rgb", scale=1.0 / 255.0, placement="center")


STRIDES = (8, 16, 32)


def grid_cells(input_w: int, input_h: int, strides: Sequence[int] = STRIDES) -> int:
    return sum((input_h // s) * (input_w // s) for s in strides)


def detect_family(
    output_shape: Sequence[int | str | None],
    metadata: Mapping[str, str],
    input_w: int,
    input_h: int,
) -> Family | None:
    """Guess the head from the output shape and ONNX metadata; None when unsure."""
    dims = [d for d in output_shape[1:] if isinstance(d, int)]
    if len(output_shape) != 3 or len(dims) != 2:
        return None
    rows, cols = dims
    if str(metadata.get("end2end", "")).lower() == "true" or (cols == 6 and rows <= 1000):
        return Family.END2END
    ultralytics = "ultralytics" in str(metadata.get("author", "")).lower()
    if rows < cols and (ultralytics or rows >= 5):
        return Family.YOLOV8
    cells = grid_cells(input_w, input_h)
    if rows == cells:
        return Family.YOLOX
    if rows == 3 * cells:
        return Family.YOLOV5
    return None


def layout_problem(family: Family, output_shape: Sequence[int | str | None]) -> str | None:
    """Why ``output_shape`` cannot be ``family``'s output, or None when it fits."""
    if len(output_shape) != 3:
        return f"expected a 3-D output, got {list(output_shape)}"
    rows, cols = output_shape[1], output_shape[2]
    if not isinstance(rows, int) or not isinstance(cols, int):
        return None  # symbolic sizes: checked when the first output arrives
    if family is Family.END2END and cols != 6:
        return "expected (batch, detections, 6)"
    if family is Family.YOLOV8 and not 5 <= rows < cols:
        return "expected (batch, 4 + classes, anchors)"
    if family in (Family.YOLOX, Family.YOLOV5) and not 6 <= cols < rows:
        return "expected (batch, anchors, 5 + classes)"
    return None


def decode(
    family: Family, output: np.ndarray, input_w: int, input_h: int, names: Sequence[str] = ()
) -> list[Detections]:
    """Decode a batched raw output into per-image candidates, carrying the model's names."""
    output = np.asarray(output, dtype=np.float32)
    if family is Family.YOLOX:
        return [_decode_yolox(image, input_w, input_h, names) for image in output]
    if family is Family.YOLOV5:
        return [_decode_objectness(image, names) for image in output]
    if family is Family.YOLOV8:
        return [_decode_yolov8(image, names) for image in output]
    return [_decode_end2end(image, names) for image in output]


@cache
def yolox_grid(input_w: int, input_h: int) -> tuple[np.ndarray, np.ndarray]:
    grids, strides = [], []
    for stride in STRIDES:
        ys, xs = np.meshgrid(
            np.arange(input_h // stride), np.arange(input_w // stride), indexing="ij"
        )
        grids.append(np.stack((xs, ys), axis=-1).reshape(-1, 2))
        strides.append(np.full((grids[-1].shape[0], 1), stride))
    return np.concatenate(grids).astype(np.float32), np.concatenate(strides).astype(np.float32)


def yolox_grid_for(anchors: int, input_w: int, input_h: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`yolox_grid`, checked against the output's anchor count."""
    grid, stride = yolox_grid(input_w, input_h)
    if anchors != grid.shape[0]:
        raise ValueError(
            f"YOLOX output has {anchors} anchors, expected {grid.shape[0]} "
            f"for a {input_w}x{input_h} input"
        )
    return grid, stride


def _decode_yolox(
    image: np.ndarray, input_w: int, input_h: int, names: Sequence[str]
) -> Detections:
    grid, stride = yolox_grid_for(image.shape[0], input_w, input_h)
    centres = (image[:, :2] + grid) * stride
    sizes = np.exp(image[:, 2:4]) * stride
    scores = image[:, 4:5] * image[:, 5:]
    return _best_class(_cxcywh_to_xyxy(np.concatenate((centres, sizes), axis=1)), scores, names)


def _decode_objectness(image: np.ndarray, names: Sequence[str]) -> Detections:
    scores = image[:, 4:5] * image[:, 5:]
    return _best_class(_cxcywh_to_xyxy(image[:, :4]), scores, names)


def _decode_yolov8(image: np.ndarray, names: Sequence[str]) -> Detections:
    return _best_class(_cxcywh_to_xyxy(image[:4].T), image[4:].T, names)


def _decode_end2end(image: np.ndarray, names: Sequence[str]) -> Detections:
    return Detections(
        xyxy=np.ascontiguousarray(image[:, :4]),
        score=np.ascontiguousarray(image[:, 4]),
        class_id=image[:, 5].astype(np.int32),
        names=names,
        suppressed=True,
    )


def _best_class(boxes: np.ndarray, scores: np.ndarray, names: Sequence[str]) -> Detections:
    class_ids = scores.argmax(axis=1).astype(np.int32)
    best = np.take_along_axis(scores, class_ids[:, None], axis=1)[:, 0]
    return Detections(
        xyxy=boxes,
        score=np.ascontiguousarray(best, dtype=np.float32),
        class_id=class_ids,
        names=names,
    )


def _cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    half = boxes[:, 2:4] / 2
    return np.concatenate((boxes[:, :2] - half, boxes[:, :2] + half), axis=1).astype(np.float32)
