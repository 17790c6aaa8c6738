"""What the graph tells each stage, worked out once from the graph: which object a node is
bound to (a model shared by the nodes that use it) and the facts its ``open`` is given.
Stages never search the graph for one another; this module is the one place that looks."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vapipe.pipeline.graph import Graph
from vapipe.pipeline.stage import PacketConsumer, Stage, StageContext


def bind_all(graph: Graph, stages: Mapping[str, Stage]) -> None:
    """Hands every node that ``binds`` the object of the nearest node in its direction that
    ``shares`` one (None where there is none), and tells the nodes behind a redact node so.
    Called once, before any node opens."""
    shared = {name: stage.shares() for name, stage in stages.items()}
    for name in graph.order:
        stage = stages[name]
        if name in graph.redacted:
            stage.behind_redaction()
        named = stage.binds_to()
        if named is not None:
            stage.bind(shared.get(named))
        elif stage.binds is not None:
            near = {"downstream": graph.downstream_of, "upstream": graph.upstream_of}[stage.binds]
            stage.bind(next((shared[n] for n in near(name) if shared[n] is not None), None))


@dataclass(frozen=True)
class Downstream:
    """What lies after a node, as its context needs it."""

    consumers: tuple[PacketConsumer, ...]
    """The stages after it that take the source's packets, nearer first."""
    reads_pixels: bool
    """Whether a stage after it reads the frames' pixels."""
    anything: bool
    """Whether anything comes after it."""


def downstream_of_each(graph: Graph, stages: Mapping[str, Stage]) -> dict[str, Downstream]:
    """``Downstream`` for every node at once, from the last nodes back: each node's is made
    of its successors' (linear in the nodes and links; asking the graph per node would walk
    a chain of thousands of nodes once per node)."""
    facts: dict[str, Downstream] = {}
    for name in reversed(graph.order):
        consumers: dict[int, PacketConsumer] = {}  # an ordered set, by identity
        reads = anything = False
        for after in graph.successors(name):
            stage = stages.get(after)
            if stage is not None:
                anything = True
                reads = reads or stage.reads_pixels
                if stage.takes_packets and isinstance(stage, PacketConsumer):
                    consumers.setdefault(id(stage), stage)
            further = facts.get(after)
            if further is not None:
                anything = anything or further.anything
                reads = reads or further.reads_pixels
                for consumer in further.consumers:
                    consumers.setdefault(id(consumer), consumer)
        facts[name] = Downstream(tuple(consumers.values()), reads, anything)
    return facts


def context_for(
    graph: Graph,
    stages: Mapping[str, Stage],
    name: str,
    *,
    like: str | None = None,
    sources_in_run: int = 1,
    source_ids: Sequence[str] = (),
    stopping: threading.Event | None = None,
    downstream: Mapping[str, Downstream] | None = None,
) -> StageContext:
    """The context node ``name`` opens with; ``like``: the node whose place in the graph it
    takes (a source added to a running service, linked as ``like`` is). ``downstream``: from
    ``downstream_of_each``, where every node's context is made at once."""
    facts = downstream if downstream is not None else downstream_of_each(graph, stages)
    after = facts.get(like or name, Downstream((), False, False))
    return StageContext(
        name=name,
        sources_in_run=sources_in_run,
        source_ids=source_ids,
        packet_consumers=list(after.consumers),
        # A node with nothing after it (opened on its own) keeps its pixels.
        pixels_read_after=not after.anything or after.reads_pixels,
        stopping=stopping if stopping is not None else threading.Event(),
    )
