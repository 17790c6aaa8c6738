"""OpenCV's INTER_LINEAR coefficient tables, computed as cv::resize computes them.

Per output column: the left source column and two 11-bit weights; per output row the same.
With these, integer arithmetic reproduces cv2.resize on 8-bit images exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

COEF_SCALE = 2048  # OpenCV's INTER_RESIZE_COEF_SCALE


@dataclass(frozen=True)
class AxisTable:
    offsets: np.ndarray
    """int32, first source index per output index (unclamped for rows, as OpenCV keeps it)."""
    weights: np.ndarray
    """int16, (n, 2): weight of the first and second source sample."""


def _axis(src: int, dst: int, clamp_edges: bool) -> AxisTable:
    scale = 1.0 / (dst / src)  # OpenCV: scale_x = 1. / inv_scale_x
    position = ((np.arange(dst) + 0.5) * scale - 0.5).astype(np.float32)
    first = np.floor(position).astype(np.int64)
    fraction = (position - first).astype(np.float32)
    if clamp_edges:  # columns: OpenCV moves out-of-range taps inside and drops the fraction
        low, high = first < 0, first >= src - 1
        fraction[low | high] = 0
        first[low] = 0
        first[high] = src - 1
    weights = np.stack(
        (np.rint((1 - fraction) * COEF_SCALE), np.rint(fraction * COEF_SCALE)), axis=1
    )
    return AxisTable(first.astype(np.int32), weights.astype(np.int16))


@lru_cache(maxsize=64)
def tables(src_w: int, src_h: int, dst_w: int, dst_h: int) -> tuple[AxisTable, AxisTable]:
    """(columns, rows) for resizing src_w x src_h to dst_w x dst_h."""
    return _axis(src_w, dst_w, clamp_edges=True), _axis(src_h, dst_h, clamp_edges=False)


def resize_reference(image: np.ndarray, dst_w: int, dst_h: int) -> np.ndarray:
    """The kernel's arithmetic in numpy (for tests): equals cv2.resize(..., INTER_LINEAR)."""
    height, width = image.shape[:2]
    cols, rows = tables(width, height, dst_w, dst_h)
    pixels = image.astype(np.int64)
    x0 = cols.offsets
    x1 = np.minimum(x0 + 1, width - 1)
    a = cols.weights.astype(np.int64)
    horizontal = pixels[:, x0] * a[None, :, 0, None] + pixels[:, x1] * a[None, :, 1, None]
    y0 = np.clip(rows.offsets, 0, height - 1)
    y1 = np.clip(rows.offsets + 1, 0, height - 1)
    b = rows.weights.astype(np.int64)
    value = (((horizontal[y0] >> 4) * b[:, 0, None, None]) >> 16) + (
        ((horizontal[y1] >> 4) * b[:, 1, None, None]) >> 16
    )
    return np.clip((value + 2) >> 2, 0, 255).astype(np.uint8)
