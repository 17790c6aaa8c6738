"""Helpers shared by file-writing sinks."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.outputs import Names


class _AnyFrame:
    """``{seq}`` of every frame at once: a marker whatever its format spec."""

    MARK = "\0"

    def __format__(self, spec: str) -> str:
        return self.MARK


def fill_path(template: str, source_id: str, seq: int | _AnyFrame = 0) -> str:
    """``out/{source_id}.mp4`` -> ``out/cam.mp4``; ``{seq}`` (images) is the frame number."""
    if "{source_id" in template:
        check_file_id(source_id, template)
    try:
        return template.format(source_id=source_id, seq=seq)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"bad placeholder in '{template}': only {{source_id}} and {{seq}} are known ({exc})",
            key="path",
        ) from None


def check_file_id(source_id: str, template: str) -> None:
    """A source id that names a file stays inside the template's folder."""
    if not source_id or source_id in (".", "..") or any(char in source_id for char in "/\\\0"):
        raise ConfigError(
            f"source_id {source_id!r} cannot be put in the file name '{template}': "
            "ids used in paths may not be empty, '.', '..' or hold '/', '\\' or NUL",
            key="path",
        )


def names_for(template: str, source_ids: Sequence[str]) -> list[Names]:
    """Every name a template gives for these sources: ``{seq}`` stands for any frame."""
    if "{seq" not in template:
        return [Names(path) for path in paths_for(template, source_ids)]
    found = set()
    for source_id in source_ids:
        filled = fill_path(template, source_id, seq=_AnyFrame())
        prefix, _, rest = filled.partition(_AnyFrame.MARK)
        found.add(Names(prefix, rest.rpartition(_AnyFrame.MARK)[2], many=True))
    return sorted(found, key=str)


def check_writable(path: Path) -> None:
    """The file's folder exists (made now if need be) and takes a new file: found out when
    the sink opens, not at the first frame or, for a video, after its first fragment."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}", key="path") from None


def output_path(template: str, source_id: str, seq: int = 0) -> Path:
    """The file for ``source_id`` (and frame ``seq``), its folder created."""
    path = Path(fill_path(template, source_id, seq))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}", key="path") from None
    return path


def paths_for(template: str, source_ids: Sequence[str]) -> list[str]:
    """Every file a path template names for these sources (one without ``{source_id}``)."""
    if template == "-":
        return []
    paths = sorted({fill_path(template, source_id) for source_id in source_ids})
    for path in paths:
        if not Path(path).name or path.endswith(("/", os.sep)) or os.path.isdir(path):
            raise ConfigError(f"'{path}' is a folder: the path must name a file", key="path")
    return paths


def restart_path(template: str, restart: int) -> str:
    """The template a shard started again for the ``restart``-th time writes to, beside the
    first run's files: ``out/{source_id}.mp4`` -> ``out/{source_id}.restart1.mp4``."""
    match = re.search(r"(\.[A-Za-z0-9]+)$", template)
    if match is None:
        return f"{template}.restart{restart}"
    return f"{template[: match.start()]}.restart{restart}{match.group(1)}"
