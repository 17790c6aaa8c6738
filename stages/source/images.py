"""A folder or a glob of still images as one source: each picture a frame, in name order."""

from __future__ import annotations

import glob
import os

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
_GLOB_CHARS = frozenset("*?[")


def image_paths(uri: str) -> list[str] | None:
    """The pictures ``uri`` names when it is a folder or a glob pattern; None otherwise."""
    if os.path.isdir(uri):
        names = sorted(os.listdir(uri))
        return [os.path.join(uri, name) for name in names if name.lower().endswith(IMAGE_SUFFIXES)]
    if _GLOB_CHARS & set(uri) and "://" not in uri:
        return sorted(p for p in glob.glob(uri) if p.lower().endswith(IMAGE_SUFFIXES))
    return None
