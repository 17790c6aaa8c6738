"""The base of the sinks whose ``path`` key is a template of the files they write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vapipe.pipeline.outputs import Names
from vapipe.pipeline.stage import Stage
from vapipe.stages.media.paths import paths_for, restart_path


class PathSink(Stage):
    """A sink whose config's ``path`` (a template) names the files it writes."""

    @classmethod
    def files_written(cls, config: Any, source_ids: Sequence[str]) -> list[str | Names]:
        return list(paths_for(config.path, source_ids))

    @classmethod
    def for_restart(cls, config: Any, restart: int) -> Any:
        """A shard started again writes its own files, beside the first run's: ``path``
        with ``.restartN`` before its extension (an event sink's records go to the parent's
        one sink instead, and ``-``, the standard output, stays)."""
        if cls.writes_records or config.path == "-":
            return config
        return config.model_copy(update={"path": restart_path(config.path, restart)})
