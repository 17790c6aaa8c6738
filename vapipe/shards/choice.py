"""Which runner a graph runs under: in this process (one shard), in ``pipeline.shards``
processes, or as actors of a Ray cluster (``pipeline.cluster = "ray"``). The command line and
the Python API choose the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vapipe.pipeline.config import ConfigSpec
from vapipe.pipeline.graph import Graph, source_type
from vapipe.pipeline.runner import Runner
from vapipe.shards.plan import shard_count
from vapipe.shards.supervisor import ShardRunner


def runner_for(
    spec: ConfigSpec,
    graph: Graph,
    *,
    overrides: Sequence[str] = (),
    max_frames: int | None = None,
    log_level: str = "info",
    log_format: str = "text",
) -> Runner | ShardRunner:
    """The runner of ``graph``. A shard re-reads the config's text with ``overrides``; a
    cluster that cannot be reached raises :class:`ConfigError`."""
    # hwaccel "auto" counts: where no GPU decoder works, the log says so and why.
    gpu_decoded = bool(graph.sources) and all(
        source_type(graph.nodes[name]).decodes_on_gpu(graph.nodes[name].config)
        for name in graph.sources
    )
    shards = shard_count(spec.settings.shards, len(graph.sources), gpu_decoded=gpu_decoded)
    options: dict[str, Any] = {
        "overrides": tuple(overrides),
        "max_frames": max_frames,
        "log_level": log_level,
        "log_format": log_format,
    }
    if spec.settings.cluster == "ray":
        from vapipe.shards.ray_actors import RayActors

        return ShardRunner(graph, shards, transport=RayActors(), **options)
    if shards > 1:
        return ShardRunner(graph, shards, **options)
    return Runner(graph, max_frames=max_frames)
