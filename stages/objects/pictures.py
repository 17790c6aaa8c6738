"""A gallery picture read with care: a regular file, its size read from its header before
anything is decoded (a decompression bomb never reaches memory), decoded whole (a truncated
file is refused, not half-read), and large enough for a model to read; each refusal one line
naming the file."""

from __future__ import annotations

import os
import re
import stat
import warnings
from pathlib import Path

import cv2
import numpy as np

from vapipe.pipeline.errors import ConfigError

MAX_PIXELS = 40_000_000
"""A picture declaring more pixels than this (a 7,700 x 5,200 photograph) is refused before
it is decoded: a gallery picture shows one person; a larger one is a mistake or an attack."""
MAX_BYTES = 50 * 2**20
"""A file larger than this (50 MiB) is refused before it is opened: no picture of one person
needs it, and a sparse or endless file would be read whole."""


def read_picture(path: Path, min_side: int) -> np.ndarray:
    """The BGR picture at ``path``; raises ConfigError (key ``gallery``) naming the file when
    it is not a regular file, is over ``MAX_BYTES``, declares over ``MAX_PIXELS``, cannot be
    decoded whole, or has a side under ``min_side`` pixels."""
    from PIL import Image

    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"gallery picture {path} cannot be read ({exc.strerror})",
                          key="gallery") from None  # fmt: skip
    if not stat.S_ISREG(mode):
        raise ConfigError(f"gallery picture {path} is not a regular file", key="gallery")
    size = os.stat(path).st_size
    if size > MAX_BYTES:
        raise ConfigError(
            f"gallery picture {path} is {size / 2**20:.0f} MiB: over {MAX_BYTES // 2**20} MiB, "
            "refused before reading",
            key="gallery",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size  # the header alone
                if width * height > MAX_PIXELS:
                    raise ConfigError(
                        f"gallery picture {path} is {width} x {height}: over "
                        f"{MAX_PIXELS // 1_000_000} million pixels, refused before decoding",
                        key="gallery",
                    )
                image.load()  # the whole file: a truncated one raises here
    except ConfigError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        declared = re.search(r"\((\d+) pixels\)", str(exc))
        pixels = f"{int(declared.group(1)):,} pixels" if declared else "too many pixels"
        raise ConfigError(
            f"gallery picture {path} declares {pixels}: over {MAX_PIXELS // 1_000_000} million, "
            "refused before decoding",
            key="gallery",
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"gallery picture {path} cannot be decoded ({reason})",
                          key="gallery") from None  # fmt: skip
    if min(width, height) < min_side:
        raise ConfigError(
            f"gallery picture {path} is {width} x {height}: under min_size {min_side} pixels",
            key="gallery",
        )
    # OpenCV decodes it for the model, as it decodes every other picture of the pipeline.
    picture = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if picture is None:
        raise ConfigError(f"gallery picture {path} cannot be read", key="gallery")
    return picture
