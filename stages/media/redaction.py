"""Hiding parts of a picture: boxes and polygons blurred, pixelated or filled, in place.

Strength is scaled to each region: a region keeps ``cells`` cells across its shorter side
whatever its size, so a face of 40 pixels and one of 400 are hidden alike (a fixed kernel
would barely touch the large one, and smear the small one's neighbours). OpenCV does the
work on the region's bounding rectangle only; a polygon's rectangle is then copied back
through the polygon's mask.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

Method = Literal["blur", "pixelate", "fill"]


def clip_box(xyxy: np.ndarray, width: int, height: int) -> tuple[int, int, int, int] | None:
    """Whole pixels covering the box, inside the frame; None when nothing of it is."""
    x0 = max(0, int(np.floor(xyxy[0])))
    y0 = max(0, int(np.floor(xyxy[1])))
    x1 = min(width, int(np.ceil(xyxy[2])))
    y1 = min(height, int(np.ceil(xyxy[3])))
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def grown(xyxy: np.ndarray, grow: float) -> np.ndarray:
    """The box with ``grow`` of its width and height added on every side."""
    x0, y0, x1, y1 = (float(v) for v in xyxy[:4])
    dx, dy = (x1 - x0) * grow, (y1 - y0) * grow
    return np.array([x0 - dx, y0 - dy, x1 + dx, y1 + dy], np.float32)


def hidden(
    patch: np.ndarray, method: Method, cells: int, color: tuple[int, int, int]
) -> np.ndarray:
    """``patch`` (H x W x 3 uint8) with its content hidden, the same shape."""
    height, width = patch.shape[:2]
    if method == "fill":
        out = np.empty_like(patch)
        out[...] = color
        return out
    # ``cells`` across the shorter side: a region's own scale, whatever its size; at least
    # two pixels a cell, so that a region smaller than ``cells`` pixels still changes.
    step = max(2.0, min(height, width) / cells)
    small = (max(1, round(width / step)), max(1, round(height / step)))
    coarse = cv2.resize(patch, small, interpolation=cv2.INTER_AREA)
    if method == "pixelate":
        return cv2.resize(coarse, (width, height), interpolation=cv2.INTER_NEAREST)
    # blur: the coarse picture interpolated back up (bilinear: no block edges; what is left
    # is colour, no detail finer than a cell). A Gaussian of a cell's size over the region at
    # full size looked the same and cost 2.4x the time (bench/redaction_cost.py).
    return cv2.resize(coarse, (width, height), interpolation=cv2.INTER_LINEAR)


def hide_box(
    image: np.ndarray,
    xyxy: np.ndarray,
    method: Method,
    cells: int,
    color: tuple[int, int, int],
) -> bool:
    """Hides the box (frame pixels) in ``image``; False when it lies outside the frame."""
    height, width = image.shape[:2]
    box = clip_box(xyxy, width, height)
    if box is None:
        return False
    x0, y0, x1, y1 = box
    image[y0:y1, x0:x1] = hidden(image[y0:y1, x0:x1], method, cells, color)
    return True


def hide_polygon(
    image: np.ndarray,
    points: np.ndarray,
    method: Method,
    cells: int,
    color: tuple[int, int, int],
) -> bool:
    """Hides the polygon (N x 2 frame pixels) in ``image``; False when it lies outside."""
    height, width = image.shape[:2]
    corners = np.array([*points.min(axis=0), *points.max(axis=0)], np.float32)
    box = clip_box(corners, width, height)
    if box is None:
        return False
    x0, y0, x1, y1 = box
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    shifted = np.round(points - (x0, y0)).astype(np.int32)
    cv2.fillPoly(mask, [shifted], 255)
    if not mask.any():
        return False
    patch = image[y0:y1, x0:x1]
    patch[mask > 0] = hidden(patch, method, cells, color)[mask > 0]
    return True
