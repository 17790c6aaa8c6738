"""What a stream added over HTTP may read: network streams, webcams and samples, and local
files only under the service's media roots. A token-less service on loopback is still
reachable by every local user and program; it must not become a way to read (and serve back
as previews) any picture or video the service's user can read."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from vapipe.pipeline.assets import search_dirs
from vapipe.pipeline.outputs import Names

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
STREAM_SCHEMES = frozenset(
    {"rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp", "tcp", "http", "https"}
)
NAMED = frozenset({"sample", "webcam"})  # sample:people, webcam:0


def default_roots() -> list[str]:
    """The working directory and the folders sample media are found in."""
    return [os.getcwd(), *(str(folder) for folder in search_dirs("media"))]


def refusal(uri: str, files: Iterable[str | Names], roots: list[str] | None) -> str | None:
    """Why a stream of ``uri`` (reading ``files``) may not be added, or None."""
    scheme = SCHEME.match(uri)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name not in STREAM_SCHEMES | NAMED:
            allowed = ", ".join(sorted(STREAM_SCHEMES | NAMED))
            return f"uri: '{name}:' is not an input a stream may use ({allowed}, or a path)"
    folders = [Path(os.path.realpath(root)) for root in (roots or default_roots())]
    for names in files:
        path = Path(os.path.realpath(names if isinstance(names, str) else names.prefix))
        if not any(path == folder or folder in path.parents for folder in folders):
            shown = ", ".join(map(str, folders))
            return f"uri: {path} is outside the media roots ({shown}): see [serve] media_roots"
    return None
