"""Helpers shared by file-writing sinks."""

from __future__ import annotations

from pathlib import Path

from vapipe.pipeline.errors import ConfigError


def output_path(template: str, source_id: str) -> Path:
    """``out/{source_id}.mp4`` -> ``out/cam.mp4``, creating the folder."""
    try:
        path = Path(template.format(source_id=source_id))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"bad placeholder in '{template}': only {{source_id}} is known ({exc})", key="path"
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
