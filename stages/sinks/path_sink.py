"""The base of the sinks whose ``path`` key is a template of the files they write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vapipe.pipeline.outputs import Names
from vapipe.pipeline.stage import Stage
from vapipe.stages.media.paths import paths_for


class PathSink(Stage):
    """A sink whose config's ``path`` (a template) names the files it writes."""

    @classmethod
    def files_written(cls, config: Any, source_ids: Sequence[str]) -> list[str | Names]:
        return list(paths_for(config.path, source_ids))
