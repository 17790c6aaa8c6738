"""Two callers of one graph at once (two infer workers share the head decode's graphs): each
gets the outputs of its own input, never the other's (stages/lazy_graphs.py's lock), through
the stand-in capture of tests/fakes/graphs.py."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from tests.fakes.graphs import StandInGraphs  # noqa: E402


def test_two_callers_of_one_graph_each_get_their_own_outputs() -> None:
    graphs = StandInGraphs(torch)
    double = lambda source: (source * 2,)  # noqa: E731
    make = lambda: torch.zeros(4)  # noqa: E731
    graphs.run("k", lambda s: s.copy_(torch.ones(4)), make, double)  # captured

    def slow_fill(value: float):  # widens the window between writing the input and replaying
        def fill(static_in: torch.Tensor) -> None:
            static_in.fill_(value)
            time.sleep(0.05)

        return fill

    got: dict[float, torch.Tensor] = {}

    def call(value: float) -> None:
        outputs = graphs.run("k", slow_fill(value), make, double)
        assert outputs is not None
        got[value] = outputs[0]

    threads = [threading.Thread(target=call, args=(v,)) for v in (3.0, 5.0, 7.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {v: t.tolist() for v, t in got.items()} == {v: [2 * v] * 4 for v in (3.0, 5.0, 7.0)}
    assert graphs.replays == 3 and len(graphs.captured) == 1


def test_the_infer_stats_say_whether_the_head_decodes_graphs_ran() -> None:
    """A failed capture turns a node's graphs off with only a log line: the stats say so."""
    from types import SimpleNamespace

    from vapipe.stages.infer.stage import InferStage

    graphs = StandInGraphs(torch)
    graphs.run("k", lambda s: s.fill_(1), lambda: torch.zeros(2), lambda s: (s + 1,))
    graphs.run("k", lambda s: s.fill_(2), lambda: torch.zeros(2), lambda s: (s + 1,))
    stage = InferStage.__new__(InferStage)
    stage.model = SimpleNamespace(backend=None, loaded=False, head=None,
                                  device_decoder=SimpleNamespace(graphs=graphs))  # fmt: skip
    stage.schedule = SimpleNamespace(interval=1, interval_s=None)
    stage.config = SimpleNamespace(max_batch=8)
    stats = stage.stats()
    assert stats["head_decode"] == "on the device"
    assert stats["head_decode_graphs"] == 1 and stats["head_decode_graph_replays"] == 1
    assert stats["head_decode_graphs_on"] is True
    stage.model.device_decoder = SimpleNamespace(graphs=None)  # on the CPU: nothing to say
    assert not any(key.startswith("head_decode_") for key in stage.stats())
