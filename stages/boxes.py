"""Overlaps of xyxy boxes, the one place they are computed: non-maximum suppression, the
tracker's association, the analytics' choice of a snapshot box and the scoring of the
benchmarks all use these."""

from __future__ import annotations

import numpy as np


def _intersections(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    width = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    height = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return np.clip(width, 0, None) * np.clip(height, 0, None)


def _areas(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def intersection_over_first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much of each box in ``a`` lies inside each box in ``b`` (0-1; N x M)."""
    return _intersections(a, b) / np.maximum(_areas(a), 1e-12)[:, None]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (N x 4) with every box in ``b`` (M x 4)."""
    inter = _intersections(a, b)
    area_a, area_b = _areas(a), _areas(b)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box with each of ``boxes``."""
    return iou_matrix(box[None, :], boxes)[0]
