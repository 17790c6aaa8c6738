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
