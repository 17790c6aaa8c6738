"""PP-OCR's two models as this project runs them: where the files are (the ``rapidocr``
wheel's, or any pair given by path), the text detector's probability map made into boxes
(DB: threshold, contours, each region's rotated rectangle grown by ``unclip``), a box cut out
straight at the recogniser's height, and its output read (CTC: best class per column,
repeats and blanks dropped, the characters from the model's own list)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vapipe.pipeline.errors import ConfigError

RAPIDOCR = "rapidocr"
"""The ``model`` / ``rec_model`` value that means the models in the installed ``rapidocr``
package (``pip install 'vapipe[ocr]'``)."""
RAPIDOCR_FILES = {"det": "PP-OCRv6_det_small.onnx", "rec": "PP-OCRv6_rec_small.onnx"}
REC_HEIGHT = 48
"""The recogniser's input height (PP-OCRv3 to v6)."""


def rapidocr_model(which: str, key: str) -> str:
    """The path of the ``rapidocr`` wheel's detection (``det``) or recognition (``rec``)
    model; a one-line error saying what to install when it is not there."""
    spec = importlib.util.find_spec(RAPIDOCR)
    if spec is None or spec.origin is None:
        raise ConfigError(
            "the rapidocr models are not installed: pip install 'vapipe[ocr]' (or give an "
            "ONNX pair by path: model and rec_model)",
            key=key,
        )
    path = Path(spec.origin).parent / "models" / RAPIDOCR_FILES[which]
    if not path.is_file():
        raise ConfigError(f"{path}: not in the installed rapidocr package", key=key)
    return str(path)


def characters(listed: str | None, classes: int, model: str, file: str | None) -> list[str]:
    """Class index -> character of a CTC recogniser: index 0 the blank, then the listed
    characters (the model's ``character`` metadata, or ``file`` one a line), then a space
    (PaddleOCR's ``use_space_char``). A list that does not fit the model's classes is an
    error naming both counts."""
    if file is not None:
        try:
            listed = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the character list: {exc}", key="characters") from None
    if listed is None:
        raise ConfigError(
            f"model {model} has no character list in its metadata: set characters to a file "
            "of them, one a line",
            key="characters",
        )
    chars = ["", *listed.splitlines()]
    if len(chars) + 1 == classes:
        chars.append(" ")
    if len(chars) != classes:
        where = file or f"{model}'s metadata"
        raise ConfigError(
            f"{where} lists {len(chars) - 1} characters; model {model} reads {classes} classes "
            f"(the blank, the characters and a space: {classes - 2} characters expected)",
            key="characters",
        )
    return chars


@dataclass(frozen=True)
class DbRules:
    """PaddleOCR's DB post-processing settings."""

    thresh: float = 0.3
    """A pixel of the probability map above this is text."""
    box_thresh: float = 0.5
    """A region's mean probability must be at least this."""
    unclip: float = 1.6
    """How much a region is grown (DB predicts a shrunk core of the text)."""
    min_side: float = 3.0
    """Regions thinner than this (map pixels) are dropped."""


@dataclass(frozen=True)
class TextBox:
    """A text region: its rectangle grown by ``unclip`` (4 x 2 corner points), and its
    score."""

    corners: np.ndarray
    score: float

    def moved(self, move: Callable[[np.ndarray], np.ndarray]) -> TextBox:
        """The same region in other coordinates (map pixels -> frame pixels)."""
        return TextBox(move(self.corners), self.score)


def text_boxes(prob: np.ndarray, rules: DbRules) -> list[TextBox]:
    """The text regions of a probability map (H x W), map pixels."""
    bitmap = (prob > rules.thresh).astype(np.uint8)
    contours, _ = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    found = []
    for contour in contours:
        (cx, cy), (width, height), angle = cv2.minAreaRect(contour)
        if min(width, height) < rules.min_side:
            continue
        x, y, w, h = cv2.boundingRect(contour)
        mask = np.zeros((h, w), np.uint8)
        cv2.fillPoly(mask, [contour - np.array([x, y])], 1)
        score = float(cv2.mean(prob[y : y + h, x : x + w], mask)[0])
        if score < rules.box_thresh:
            continue
        # The rectangle grown by area * unclip / perimeter on every side, as DB's unclip does
        # with a polygon offset (a rectangle's offset is a rectangle).
        grow = width * height * rules.unclip / (2 * (width + height))
        corners = cv2.boxPoints(((cx, cy), (width + 2 * grow, height + 2 * grow), angle))
        found.append(TextBox(corners.astype(np.float32), score))
    return found


def joined_lines(boxes: list[TextBox], gap: float = 1.2) -> list[TextBox]:
    """Regions that lie on one text line, side by side (centres within half a height of
    each other vertically, at most ``gap`` heights apart), joined into one: a plate's groups
    (``KX 4921``) are often found as separate words, and read apart neither is a plate."""
    lines = list(boxes)
    joined = True
    while joined and len(lines) > 1:
        joined = False
        for i in range(len(lines)):
            for j in range(i + 1, len(lines)):
                if _same_line(lines[i].corners, lines[j].corners, gap):
                    lines[i] = TextBox(
                        _enclosing(lines[i].corners, lines[j].corners),
                        min(lines[i].score, lines[j].score),
                    )
                    del lines[j]
                    joined = True
                    break
            if joined:
                break
    return lines


def _enclosing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return cv2.boxPoints(cv2.minAreaRect(np.concatenate([a, b]))).astype(np.float32)


def _same_line(a: np.ndarray, b: np.ndarray, gap: float) -> bool:
    (ax1, ay1), (ax2, ay2) = a.min(axis=0), a.max(axis=0)
    (bx1, by1), (bx2, by2) = b.min(axis=0), b.max(axis=0)
    height = max(ay2 - ay1, by2 - by1)
    centres_apart = abs((ay1 + ay2) - (by1 + by2)) / 2
    apart = max(bx1 - ax2, ax1 - bx2)  # negative: they overlap
    return bool(centres_apart <= 0.5 * height and apart <= gap * height)


def ordered(corners: np.ndarray) -> np.ndarray:
    """A rectangle's corners as top-left, top-right, bottom-right, bottom-left, its long side
    horizontal (a text line is read along it)."""
    by_x = corners[np.argsort(corners[:, 0], kind="stable")]
    left, right = by_x[:2], by_x[2:]
    top_left, bottom_left = left[np.argsort(left[:, 1], kind="stable")]
    top_right, bottom_right = right[np.argsort(right[:, 1], kind="stable")]
    return np.array([top_left, top_right, bottom_right, bottom_left], np.float32)


def straightened(
    image: np.ndarray, corners: np.ndarray, max_width: int, height: int = REC_HEIGHT
) -> np.ndarray:
    """The quadrilateral ``corners`` (frame pixels, any order) cut out straight at ``height``
    pixels, its width by its aspect (at most ``max_width``)."""
    tl, tr, br, bl = ordered(corners)
    width_px = max(float(np.linalg.norm(tr - tl)), float(np.linalg.norm(br - bl)), 1.0)
    height_px = max(float(np.linalg.norm(bl - tl)), float(np.linalg.norm(br - tr)), 1.0)
    width = max(1, min(max_width, math.ceil(height * width_px / height_px)))
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    matrix = cv2.getPerspectiveTransform(np.array([tl, tr, br, bl], np.float32), target)
    return cv2.warpPerspective(
        image, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )


def rec_batch(crops: list[np.ndarray], width: int) -> np.ndarray:
    """Straightened BGR crops -> the recogniser's input (N x 3 x 48 x width): ``x / 127.5 - 1``,
    each crop at the left and zeros after it, as PaddleOCR pads."""
    batch = np.zeros((len(crops), 3, REC_HEIGHT, width), np.float32)
    for index, crop in enumerate(crops):
        w = min(crop.shape[1], width)
        batch[index, :, :, :w] = crop[:, :w].transpose(2, 0, 1).astype(np.float32) / 127.5 - 1.0
    return batch


def ctc_read(probs: np.ndarray, chars: list[str]) -> tuple[str, tuple[float, ...]]:
    """One row of the recogniser's output (columns x classes): the text (the best class per
    column, repeats merged, blanks dropped) and each character's probability."""
    best = probs.argmax(axis=1)
    conf = probs.max(axis=1)
    keep = best != 0
    keep[1:] &= best[1:] != best[:-1]
    return "".join(chars[i] for i in best[keep]), tuple(float(c) for c in conf[keep])
