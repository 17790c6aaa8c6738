"""Two things every kind of input needs: an open that Ctrl-C can abandon, and pictures
turned upright."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def call_or_stop(call: Callable[[], T], stop: threading.Event, name: str) -> T | None:
    """``call()`` in a thread of its own; None as soon as ``stop`` is set. FFmpeg cannot be
    interrupted while it opens a URL, and Ctrl-C must not wait ``open_timeout_s``: the
    abandoned call ends by itself at its timeout and its result is dropped."""
    outcome: list[Any] = []

    def attempt() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)

    opener = threading.Thread(target=attempt, name=name, daemon=True)
    opener.start()
    while opener.is_alive():
        if stop.wait(0.05):
            return None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


BT601_OR_UNSPECIFIED = {2, 5, 6}
"""AVColorSpace values whose pictures FFmpeg converts to BGR with BT.601 (2: unspecified)."""


def plain_i420(picture: Any, auto_rotate: bool) -> bool:
    """Whether the picture can travel as I420 planes and be converted as OpenCV does (BT.601,
    limited range, even size, nothing to rotate) without changing its colours."""
    return (
        picture.format.name == "yuv420p"
        and picture.width % 2 == 0
        and picture.height % 2 == 0
        and getattr(picture, "colorspace", 2) in BT601_OR_UNSPECIFIED
        and getattr(picture, "color_range", 0) != 2  # 2: full ("JPEG") range
        and not quarter_turns(picture, auto_rotate)
    )


def quarter_turns(picture: Any, auto_rotate: bool) -> int:
    """Counterclockwise quarter turns that make the picture upright (0 without auto_rotate)."""
    return round(getattr(picture, "rotation", 0) / 90) % 4 if auto_rotate else 0


def upright(picture: Any, auto_rotate: bool) -> np.ndarray:
    """The picture as BGR, as it is meant to be seen: phones record sideways and say so in
    the display matrix (degrees counterclockwise, FFmpeg's convention)."""
    image = picture.to_ndarray(format="bgr24")
    turns = quarter_turns(picture, auto_rotate)
    return np.ascontiguousarray(np.rot90(image, turns)) if turns else image
