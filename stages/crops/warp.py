"""From an object's box to a model input: the part of the box and its margin, fitted to the
model's size in one affine warp (crop and resize at once), then scaled and normalised.

The warp's matrix maps frame pixels to input pixels; its inverse maps boxes a model found in
the crop back to the frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np

Fit = Literal["letterbox", "square", "stretch"]
PAD = 114
"""The grey the letterbox pads with (as the detectors' letterbox)."""


@dataclass(frozen=True)
class CropRule:
    """Which pixels of a box become the model's input, and how they are fitted."""

    region: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
    margin: float = 0.0
    fit: Fit = "letterbox"


@dataclass(frozen=True)
class Normalise:
    """``(pixel * scale - mean) / std`` in the channel order ``color``."""

    color: Literal["rgb", "bgr"]
    scale: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    def apply(self, crops: np.ndarray) -> np.ndarray:
        """N x H x W x 3 uint8 BGR -> float32 in the model's channel order, normalised."""
        out = crops.astype(np.float32)
        if self.color == "rgb":
            out = out[..., ::-1]
        out *= np.float32(self.scale)
        if any(self.mean):
            out -= np.asarray(self.mean, np.float32)
        if any(value != 1 for value in self.std):
            out /= np.asarray(self.std, np.float32)
        return np.ascontiguousarray(out)


def crop_box(box: np.ndarray, rule: CropRule) -> np.ndarray:
    """The frame rectangle (x1, y1, x2, y2, float) to crop for an object's box."""
    x1, y1, x2, y2 = (float(v) for v in box)
    width, height = x2 - x1, y2 - y1
    rx1, ry1, rx2, ry2 = rule.region
    x1, x2 = x1 + rx1 * width, x1 + rx2 * width
    y1, y2 = y1 + ry1 * height, y1 + ry2 * height
    width, height = x2 - x1, y2 - y1
    x1, x2 = x1 - rule.margin * width, x2 + rule.margin * width
    y1, y2 = y1 - rule.margin * height, y2 + rule.margin * height
    if rule.fit == "square":
        side = max(x2 - x1, y2 - y1)
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        x1, x2, y1, y2 = cx - side / 2, cx + side / 2, cy - side / 2, cy + side / 2
    return np.array([x1, y1, x2, y2], np.float64)


def warp_matrix(rect: np.ndarray, size: tuple[int, int], fit: Fit) -> np.ndarray:
    """2 x 3: frame pixels -> input pixels of a ``size`` (width, height) input, the rectangle
    filling it (``stretch``, ``square``) or fitted in its middle (``letterbox``)."""
    width, height = size
    x1, y1, x2, y2 = rect
    crop_w, crop_h = max(x2 - x1, 1e-6), max(y2 - y1, 1e-6)
    scale_x, scale_y = width / crop_w, height / crop_h
    offset_x = offset_y = 0.0
    if fit == "letterbox":
        scale_x = scale_y = min(scale_x, scale_y)
        offset_x = (width - crop_w * scale_x) / 2
        offset_y = (height - crop_h * scale_y) / 2
    # Pixel centres: OpenCV maps input pixel centre (i + 0.5) from frame (x + 0.5).
    return np.array(
        [
            [scale_x, 0.0, offset_x - x1 * scale_x + 0.5 * scale_x - 0.5],
            [0.0, scale_y, offset_y - y1 * scale_y + 0.5 * scale_y - 0.5],
        ],
        np.float64,
    )


Window = tuple[int, int, int, int]
"""Where in the input a crop's pixels go (x1, y1, x2, y2): the rest is padding."""


def window_of(rect: np.ndarray, matrix: np.ndarray, size: tuple[int, int]) -> Window:
    """The input pixels the rectangle ``rect`` fills through ``matrix`` (a letterbox fills
    less than the input)."""
    x1, y1, x2, y2 = to_input(np.asarray(rect, np.float64)[None], matrix)[0]
    width, height = size
    return (max(0, round(x1)), max(0, round(y1)), min(width, round(x2)), min(height, round(y2)))


def cut(
    image: np.ndarray, matrix: np.ndarray, size: tuple[int, int], window: Window | None = None
) -> np.ndarray:
    """The input-sized crop (H x W x 3 uint8) of ``image`` through ``matrix``; what lies
    outside the frame, and outside ``window`` if given, is grey."""
    crop = cv2.warpAffine(
        image,
        matrix,
        size,
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(PAD, PAD, PAD),
    )
    if window is not None and window != (0, 0, *size):
        x1, y1, x2, y2 = window
        padded = np.full_like(crop, PAD)
        padded[y1:y2, x1:x2] = crop[y1:y2, x1:x2]
        return padded
    return crop


def cut_i420(
    yuv: np.ndarray, matrix: np.ndarray, size: tuple[int, int], window: Window | None = None
) -> np.ndarray:
    """``cut`` of the BGR picture of ``yuv`` (I420, (height * 3 / 2, width)) without making
    that whole picture: only the part the warp reads is converted (a 1080p frame's colour
    conversion costs 3 ms; a crop's, a few hundredths). The same pixels as ``cut`` of the
    whole picture converted with OpenCV: its I420 conversion upsamples chroma by repeating
    each sample over 2 x 2 pixels, so a part aligned to even rows and columns converts alike."""
    height, width = yuv.shape[0] * 2 // 3, yuv.shape[1]
    out_w, out_h = size
    inverse = cv2.invertAffineTransform(matrix)
    corners = np.array([[0, 0, 1], [out_w, 0, 1], [0, out_h, 1], [out_w, out_h, 1]], np.float64)
    seen = corners @ inverse.T
    # 2 px beyond what is sampled (bilinear reads a neighbour); rows in 4s, columns in 2s.
    x0 = max(0, (int(np.floor(seen[:, 0].min())) - 2) // 2 * 2)
    y0 = max(0, (int(np.floor(seen[:, 1].min())) - 2) // 4 * 4)
    x1 = min(width, -(-(int(np.ceil(seen[:, 0].max())) + 3) // 2) * 2)
    y1 = min(height, -(-(int(np.ceil(seen[:, 1].max())) + 3) // 4) * 4)
    if x1 - x0 < 2 or y1 - y0 < 4:  # nothing of the frame is seen: all padding
        return np.full((out_h, out_w, 3), PAD, np.uint8)
    luma = yuv[:height]
    # Each chroma plane is a quarter of the luma's bytes; where height / 2 is odd it does not
    # end on a row of the (height * 3 / 2, width) array.
    flat_planes = yuv.reshape(-1)
    quarter = height * width // 4
    u = flat_planes[height * width : height * width + quarter].reshape(height // 2, width // 2)
    v = flat_planes[height * width + quarter :].reshape(height // 2, width // 2)
    part_w, part_h = x1 - x0, y1 - y0
    part = np.empty((part_h * 3 // 2, part_w), np.uint8)
    part[:part_h] = luma[y0:y1, x0:x1]
    chroma = part_h * part_w // 4
    flat = part.reshape(-1)
    start = part_h * part_w
    flat[start : start + chroma] = u[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2].reshape(-1)
    flat[start + chroma :] = v[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2].reshape(-1)
    bgr = cv2.cvtColor(part, cv2.COLOR_YUV2BGR_I420)
    shifted = matrix.copy()
    shifted[:, 2] += matrix[:, :2] @ np.array([x0, y0], np.float64)
    return cut(bgr, shifted, size, window)


def _corners(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) of xyxy box corners through ``matrix`` (no rotation): input = frame *
    scale + shift. The warp maps pixel centres; for corners its half-pixel terms cancel out."""
    scale = np.array([matrix[0, 0], matrix[1, 1]] * 2)
    return scale, np.array([matrix[0, 2], matrix[1, 2]] * 2) - 0.5 * scale + 0.5


def to_input(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """xyxy boxes in frame pixels -> input pixels (corners)."""
    scale, shift = _corners(matrix)
    return boxes * scale + shift


def to_frame(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """xyxy boxes in input pixels -> frame pixels (the inverse of ``matrix``, which has no
    rotation), as float32."""
    scale, shift = _corners(matrix)
    return ((boxes - shift) / scale).astype(np.float32)


def points_to_frame(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """... x 2 points in input pixels -> frame pixels."""
    return to_frame(np.concatenate([points, points], axis=-1), matrix)[..., :2]


def touches_edge(box: np.ndarray, width: int, height: int, slack: float = 1.0) -> bool:
    """Whether the box reaches the frame's border (part of the object is outside)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return x1 <= slack or y1 <= slack or x2 >= width - slack or y2 >= height - slack
