"""What the graph tells each stage, worked out once: the object a node is bound to (nearest in
its direction, None where none is shared) and its opening context (packet consumers, whether
pixels are read after it)."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest

from vapipe.pipeline.graph import Edge, Graph
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.pipeline.wiring import bind_all, context_for


class Sharing(Stage):
    """Shares an object of its own (a model, say)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, StageConfig())
        self.thing = object()

    def shares(self) -> object:
        return self.thing


class Bound(Stage):
    binds: ClassVar[Any] = "downstream"
    reads_pixels = False

    def __init__(self, name: str, direction: str = "downstream") -> None:
        super().__init__(name, StageConfig())
        self.binds = direction  # type: ignore[misc]
        self.got: list[object | None] = []

    def bind(self, shared: object | None) -> None:
        self.got.append(shared)


class Packets(Stage):
    reads_pixels = False

    def __init__(self, name: str, takes: bool) -> None:
        super().__init__(name, StageConfig())
        self.takes_packets = takes

    def take_packet(self, source_id: str, packet: Any) -> None:  # a consumer by shape
        raise AssertionError("not called here")


def graph_of(*links: tuple[str, str]) -> Graph:
    order: list[str] = []
    for src, dst in links:
        order += [n for n in (src, dst) if n not in order]
    edges = [Edge(src, dst, 4, Leaky.NO) for src, dst in links]
    return Graph(spec=None, order=order, edges=edges)  # type: ignore[arg-type]


def test_a_node_is_bound_to_the_nearest_shared_object_in_its_direction() -> None:
    pre, near, far = Bound("pre"), Sharing("near"), Sharing("far")
    after = Bound("after", "upstream")
    stages: dict[str, Stage] = {"pre": pre, "near": near, "after": after, "far": far}
    bind_all(graph_of(("pre", "near"), ("near", "after"), ("after", "far")), stages)
    assert pre.got == [near.thing]  # downstream: near, not far
    assert after.got == [near.thing]  # upstream: near, though far is just as close downstream


def test_nothing_shared_in_its_direction_binds_none_once() -> None:
    first, lone = Sharing("first"), Bound("lone")
    bind_all(graph_of(("first", "lone")), {"first": first, "lone": lone})
    assert lone.got == [None]  # the sharing node is upstream; it looks downstream


def test_a_node_that_binds_nothing_is_left_alone() -> None:
    plain, shared = Stage("plain", StageConfig()), Sharing("shared")
    bind_all(graph_of(("plain", "shared")), {"plain": plain, "shared": shared})  # no error


def test_the_context_names_the_packet_consumers_after_the_node_only() -> None:
    before = Packets("before", takes=True)
    source = Stage("source", StageConfig())
    takes, declines = Packets("takes", takes=True), Packets("declines", takes=False)
    graph = graph_of(("before", "source"), ("source", "takes"), ("source", "declines"))
    stages: dict[str, Stage] = {
        "before": before, "source": source, "takes": takes, "declines": declines
    }  # fmt: skip
    context = context_for(graph, stages, "source", sources_in_run=3, source_ids=["a"])
    assert list(context.packet_consumers) == [takes]
    assert (context.name, context.sources_in_run, list(context.source_ids)) == ("source", 3, ["a"])


def test_pixels_are_read_after_a_node_when_any_later_stage_reads_them() -> None:
    first, blind = Stage("first", StageConfig()), Packets("blind", takes=False)
    reader = Stage("reader", StageConfig())  # reads pixels unless it says not
    no_reader = {"first": first, "blind": blind}
    assert not context_for(graph_of(("first", "blind")), no_reader, "first").pixels_read_after
    both = {**no_reader, "reader": reader}
    graph = graph_of(("first", "blind"), ("blind", "reader"))
    assert context_for(graph, both, "first").pixels_read_after  # two links on
    assert context_for(graph, both, "reader").pixels_read_after  # a leaf keeps them


def test_the_graphs_facts_are_keywords_with_a_single_run_by_default() -> None:
    cam = Stage("cam", StageConfig())
    context = context_for(graph_of(("cam", "cam2")), {"cam": cam}, "cam")
    assert (context.sources_in_run, list(context.source_ids)) == (1, [])
    with pytest.raises(TypeError):
        context_for(graph_of(("cam", "cam2")), {"cam": cam}, "cam", None, 3)  # type: ignore[misc]


def test_a_node_added_like_another_gets_that_nodes_context() -> None:
    cam, clips = Stage("cam", StageConfig()), Packets("clips", takes=True)
    stages: dict[str, Stage] = {"cam": cam, "clips": clips}
    context = context_for(graph_of(("cam", "clips")), stages, "new", like="cam")
    assert context.name == "new" and list(context.packet_consumers) == [clips]
    assert not context.pixels_read_after


def test_packet_consumers_further_on_count_and_the_stop_event_is_the_runs() -> None:
    source, blind = Stage("source", StageConfig()), Packets("blind", takes=False)
    takes = Packets("takes", takes=True)
    graph = graph_of(("source", "blind"), ("blind", "takes"))
    stages: dict[str, Stage] = {"source": source, "blind": blind, "takes": takes}
    stop = threading.Event()
    context = context_for(graph, stages, "source", stopping=stop)
    assert list(context.packet_consumers) == [takes]  # two links on
    assert context.stopping is stop
    assert context_for(graph, stages, "source").stopping is not stop


def test_a_node_the_graph_does_not_know_keeps_its_pixels_and_takes_no_packets() -> None:
    reader = Stage("reader", StageConfig())
    context = context_for(graph_of(("cam", "reader")), {"reader": reader}, "elsewhere")
    assert context.pixels_read_after and list(context.packet_consumers) == []
