"""Helpers shared by file-writing sinks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.stage import Stage


def fill_path(template: str, source_id: str, seq: int = 0) -> str:
    """``out/{source_id}.mp4`` -> ``out/cam.mp4``; ``{seq}`` (images) is the frame number."""
    try:
        return template.format(source_id=source_id, seq=seq)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"bad placeholder in '{template}': only {{source_id}} and {{seq}} are known ({exc})",
            key="path",
        ) from None


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
    return sorted({fill_path(template, source_id) for source_id in source_ids})


class PathSink(Stage):
    """A sink whose config's ``path`` (a template) names the files it writes."""

    @classmethod
    def files_written(cls, config: Any, source_ids: Sequence[str]) -> list[str]:
        return paths_for(config.path, source_ids)
