"""Text on frames: labels, names and counts in any script.

OpenCV's Hershey fonts draw ASCII only (anything else comes out as ``?``), so text that is
all ASCII, nearly every label, is drawn by OpenCV as before, and other text by Pillow with a
Unicode font: ``VAPIPE_FONT`` (a TrueType or OpenType file) where set, else DejaVu Sans or
Noto Sans where the system has one. What that font cannot draw (an emoji, a script it lacks),
or everything past ASCII where no such font is found, is drawn as its ASCII letter where it
has one (``é`` as ``e``) and as ``?`` where not, and said once per text in the log.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import unicodedata
from typing import Any

import cv2
import numpy as np

log = logging.getLogger(__name__)

FONT = cv2.FONT_HERSHEY_SIMPLEX
# Looked for by name in the system's font folders (Pillow searches them) and in these paths.
UNICODE_FONTS = ("DejaVuSans.ttf", "NotoSans-Regular.ttf", "LiberationSans-Regular.ttf")
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "/Library/Fonts", "C:/Windows/Fonts")
# Pillow's size (pixels per em) that matches the Hershey font's cap height at scale 1.
PIXELS_PER_SCALE = 36

_warned: set[str] = set()
_warned_lock = threading.Lock()


def text_size(text: str, scale: float) -> tuple[tuple[int, int], int]:
    """((width, height above the baseline), depth below it), as ``cv2.getTextSize`` gives."""
    drawn, font = _for_drawing(text, scale)
    if font is None:
        (width, height), base = cv2.getTextSize(drawn, FONT, scale, 1)
        return (width, height), base
    left, top, right, bottom = font.getbbox(drawn, anchor="ls")
    return (right - left, -top), max(bottom, 0)


def put_text(
    canvas: np.ndarray, text: str, origin: tuple[int, int], scale: float, color: tuple[int, ...]
) -> None:
    """``text`` with its baseline starting at ``origin``, in BGR ``color``."""
    drawn, font = _for_drawing(text, scale)
    if font is None:
        cv2.putText(canvas, drawn, origin, FONT, scale, color, 1, cv2.LINE_AA)
        return
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(drawn, anchor="ls")
    if right <= left or bottom <= top:
        return
    mask = Image.new("L", (right - left, bottom - top))
    ImageDraw.Draw(mask).text((-left, -top), drawn, font=font, fill=255, anchor="ls")
    alpha = np.asarray(mask, np.float32)[..., None] / 255.0
    x, y = origin[0] + left, origin[1] + top
    # The part of the text inside the canvas.
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + alpha.shape[1], canvas.shape[1]), min(y + alpha.shape[0], canvas.shape[0])
    if x1 <= x0 or y1 <= y0:
        return
    part = alpha[y0 - y : y1 - y, x0 - x : x1 - x]
    region = canvas[y0:y1, x0:x1].astype(np.float32)
    ink = np.asarray(color[: canvas.shape[2]], np.float32)
    canvas[y0:y1, x0:x1] = (region * (1 - part) + ink * part + 0.5).astype(canvas.dtype)


def _for_drawing(text: str, scale: float) -> tuple[str, Any]:
    """The text to draw and Pillow's font for it (None: OpenCV's, for ASCII)."""
    if text.isascii():
        return text, None
    font = unicode_font(max(8, round(scale * PIXELS_PER_SCALE)))
    if font is None:
        return _fallback(text, text, "no Unicode font was found (set VAPIPE_FONT)"), None
    missing = [ch for ch in text if not ch.isascii() and not _has_glyph(font, ch)]
    if not missing:
        return text, font
    drawn = "".join(_ascii_of(ch) if ch in missing else ch for ch in text)
    _fallback(text, drawn, f"{font.getname()[0]} has no glyph for {''.join(missing)!r}")
    return (drawn, None) if drawn.isascii() else (drawn, font)  # ASCII: as every label


def _fallback(text: str, drawn: str, why: str) -> str:
    drawn = drawn if drawn != text else "".join(_ascii_of(ch) for ch in text)
    with _warned_lock:
        if text in _warned:
            return drawn
        _warned.add(text)
    log.warning("the label %r is drawn as %r: %s", text, drawn, why)
    return drawn


def _ascii_of(ch: str) -> str:
    if ch.isascii():
        return ch
    base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return base or "?"


@functools.lru_cache(maxsize=8)
def unicode_font(size: int) -> Any:
    """Pillow's font for text past ASCII at ``size`` pixels per em, or None where none."""
    try:
        from PIL import ImageFont
    except ImportError:  # pillow is a dependency; a stripped install still draws ASCII
        return None
    wanted = os.environ.get("VAPIPE_FONT")
    for name in [wanted] if wanted else [*UNICODE_FONTS, *_found_in_dirs()]:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    if wanted:
        log.warning("VAPIPE_FONT=%s is not a font Pillow can read", wanted)
    return None


def _found_in_dirs() -> list[str]:
    found = []
    for folder in FONT_DIRS:
        for root, _, files in os.walk(folder):
            found += [os.path.join(root, name) for name in files if name in UNICODE_FONTS]
    return found


@functools.lru_cache(maxsize=4096)
def _glyph_key(font: Any, ch: str) -> tuple[tuple[int, int], bytes]:
    mask = font.getmask(ch)
    return tuple(mask.size), bytes(mask)


def _has_glyph(font: Any, ch: str) -> bool:
    """Whether ``font`` draws ``ch`` as itself, not as its box for a missing glyph."""
    if unicodedata.category(ch).startswith(("Z", "C")):  # spaces and controls draw nothing
        return True
    return _glyph_key(font, ch) != _glyph_key(font, "\U0010fffd")
