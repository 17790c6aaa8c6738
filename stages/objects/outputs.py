"""What a model's output on a crop means, per kind: class scores, boxes found inside the
object (YOLO heads, and the face heads YuNet and UltraFace), or a unit vector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from vapipe.stages.infer.heads import Family, decode
from vapipe.stages.nms import nms

Activation = Literal["auto", "softmax", "sigmoid", "none"]
FACE_HEADS = ("yunet", "ultraface")
YUNET_STRIDES = (8, 16, 32)


def scores(output: np.ndarray, activation: Activation) -> np.ndarray:
    """N x classes scores from a classifier's output (logits or probabilities)."""
    logits = output.reshape(len(output), -1).astype(np.float64)
    if activation == "auto":
        is_probability = (
            logits.size > 0
            and logits.min() >= 0
            and logits.max() <= 1
            and np.allclose(logits.sum(axis=1), 1.0, atol=1e-3)
        )
        activation = "none" if is_probability else "softmax"
    if activation == "softmax":
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        logits = shifted / shifted.sum(axis=1, keepdims=True)
    elif activation == "sigmoid":
        logits = 1.0 / (1.0 + np.exp(-logits))
    return logits.astype(np.float32)


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero): cosine similarity is a dot product."""
    flat = vectors.reshape(len(vectors), -1).astype(np.float32)
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    return flat / np.where(norms > 0, norms, 1.0)


def head_of(output_names: Sequence[str], family: Family | None) -> str | None:
    """The face head a model's output names show, else the YOLO family given, else None."""
    names = set(output_names)
    if {"cls_8", "obj_8", "bbox_8", "kps_8"} <= names:
        return "yunet"
    if {"scores", "boxes"} <= names:
        return "ultraface"
    return family.value if family is not None else None


@dataclass(frozen=True)
class Found:
    """The boxes a detector found in one crop, in input pixels, best first."""

    xyxy: np.ndarray
    score: np.ndarray
    class_id: np.ndarray
    landmarks: np.ndarray | None = None
    """K x 5 x 2 face landmarks (YuNet), input pixels."""


def decode_yunet(rows: np.ndarray, width: int, height: int) -> Found:
    """One crop's joined YuNet rows (anchors x 16: cls, obj, box 4, landmarks 10), decoded as
    OpenCV's FaceDetectorYN does: score sqrt(cls * obj), centre offsets and log sizes per
    stride cell."""
    xs, ys, strides = [], [], []
    for step in YUNET_STRIDES:
        cols, lines = width // step, height // step
        grid_y, grid_x = np.mgrid[0:lines, 0:cols]
        xs.append(grid_x.ravel())
        ys.append(grid_y.ravel())
        strides.append(np.full(cols * lines, step))
    cell_x, cell_y = np.concatenate(xs), np.concatenate(ys)
    stride = np.concatenate(strides).astype(np.float32)
    if len(stride) != len(rows):
        raise ValueError(f"YuNet rows {len(rows)} do not fit a {width}x{height} input")
    score = np.sqrt(np.clip(rows[:, 0], 0, 1) * np.clip(rows[:, 1], 0, 1))
    centre_x = (cell_x + rows[:, 2]) * stride
    centre_y = (cell_y + rows[:, 3]) * stride
    half_w, half_h = np.exp(rows[:, 4]) * stride / 2, np.exp(rows[:, 5]) * stride / 2
    boxes = np.stack(
        [centre_x - half_w, centre_y - half_h, centre_x + half_w, centre_y + half_h], 1
    )
    points = rows[:, 6:16].reshape(-1, 5, 2)
    points = (points + np.stack([cell_x, cell_y], 1)[:, None, :]) * stride[:, None, None]
    return Found(
        boxes.astype(np.float32),
        score.astype(np.float32),
        np.zeros(len(score), np.int32),
        points.astype(np.float32),
    )


def decode_ultraface(rows: np.ndarray, width: int, height: int) -> Found:
    """One crop's joined UltraFace rows (anchors x 6: background and face scores, then a box
    in fractions of the input)."""
    boxes = rows[:, 2:6] * np.array([width, height, width, height], np.float32)
    return Found(
        boxes.astype(np.float32), rows[:, 1].astype(np.float32), np.zeros(len(rows), np.int32)
    )


def decode_yolo(rows: np.ndarray, family: Family, width: int, height: int) -> Found:
    found = decode(family, rows[None], width, height, ())[0]
    return Found(found.xyxy, found.score, found.class_id)


def select(found: Found, conf: float, iou: float, keep: int) -> Found:
    """Boxes at ``conf`` or above, suppressed (per class), the best ``keep``."""
    mask = np.isfinite(found.score) & (found.score >= conf)
    boxes, score, classes = found.xyxy[mask], found.score[mask], found.class_id[mask]
    chosen = nms(boxes, score, iou, classes, keep)
    points = found.landmarks[mask][chosen] if found.landmarks is not None else None
    return Found(boxes[chosen], score[chosen], classes[chosen], points)
