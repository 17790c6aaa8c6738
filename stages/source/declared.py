"""What the graph, the shards and the service know of a source before it opens: all read
from its config (stage.py's VideoSource is the source as it runs)."""

from __future__ import annotations

from vapipe.pipeline.assets import SAMPLE_SCHEME, Kind, manifest_entries
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.stage import SourceStage
from vapipe.stages.source.config import DEVICE_DECODERS, SourceConfig
from vapipe.stages.source.inputs import check_inputs, files_read, is_live


class ConfiguredSource(SourceStage):
    """The source's declared facts (``SourceStage``'s hooks), from a ``SourceConfig``."""

    @classmethod
    def is_live(cls, config: SourceConfig) -> bool:
        return is_live(config)

    @classmethod
    def source_id_of(cls, name: str, config: SourceConfig) -> str:
        return config.source_id or name

    @classmethod
    def assets_needed(cls, config: SourceConfig) -> list[tuple[Kind, str]]:
        if config.uri.startswith(SAMPLE_SCHEME):
            name = config.uri[len(SAMPLE_SCHEME) :]
            if name in manifest_entries("media"):
                return [("media", name)]
        return []

    @classmethod
    def files_read(cls, config: SourceConfig) -> list[str | Names]:
        return files_read(config.uri)

    @classmethod
    def uri_of(cls, config: SourceConfig) -> str:
        return config.uri

    @classmethod
    def open_timeout_s(cls, config: SourceConfig) -> float | None:
        return config.open_timeout_s

    @classmethod
    def decodes_on_gpu(cls, config: SourceConfig) -> bool:
        # "auto" counts: where no GPU decoder works, the log says so and why.
        return config.hwaccel in DEVICE_DECODERS

    @classmethod
    def check_inputs(cls, config: SourceConfig) -> None:
        check_inputs(config.uri)  # a file that is not there fails before any model loads
