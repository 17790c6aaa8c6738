"""What the graph tells each stage, worked out once from the graph: which object a node is
bound to (a model shared by the nodes that use it) and the facts its ``open`` is given.
Stages never search the graph for one another; this module is the one place that looks."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from vapipe.pipeline.graph import Graph
from vapipe.pipeline.stage import PacketConsumer, Stage, StageContext


def bind_all(graph: Graph, stages: Mapping[str, Stage]) -> None:
    """Hands every node that ``binds`` the object of the nearest node in its direction that
    ``shares`` one (None where there is none). Called once, before any node opens."""
    shared = {name: stage.shares() for name, stage in stages.items()}
    for name in graph.order:
        stage = stages[name]
        named = stage.binds_to()
        if named is not None:
            stage.bind(shared.get(named))
        elif stage.binds is not None:
            near = {"downstream": graph.downstream_of, "upstream": graph.upstream_of}[stage.binds]
            stage.bind(next((shared[n] for n in near(name) if shared[n] is not None), None))


def context_for(
    graph: Graph,
    stages: Mapping[str, Stage],
    name: str,
    *,
    like: str | None = None,
    sources_in_run: int = 1,
    source_ids: Sequence[str] = (),
    stopping: threading.Event | None = None,
) -> StageContext:
    """The context node ``name`` opens with; ``like``: the node whose place in the graph it
    takes (a source added to a running service, linked as ``like`` is)."""
    after = [stages[n] for n in graph.downstream_of(like or name) if n in stages]
    consumers: list[PacketConsumer] = [
        stage for stage in after if stage.takes_packets and isinstance(stage, PacketConsumer)
    ]
    return StageContext(
        name=name,
        sources_in_run=sources_in_run,
        source_ids=source_ids,
        packet_consumers=consumers,
        # A node with nothing after it (opened on its own) keeps its pixels.
        pixels_read_after=not after or any(stage.reads_pixels for stage in after),
        stopping=stopping if stopping is not None else threading.Event(),
    )
