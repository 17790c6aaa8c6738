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


def test_the_real_capture_runs_once_under_the_process_lock_and_passes_its_settings() -> None:
    """``_capture`` itself (the stand-in replaces it elsewhere), against a fake ``torch.cuda``
    whose capture runs the function eagerly: the capture takes the process's lock exactly once
    (a second take of the non-reentrant lock would hang the capturing thread), captures on the
    caller's stream in thread_local mode, and shares one pool between graphs."""
    from types import SimpleNamespace

    from vapipe.stages.lazy_graphs import CAPTURING, LazyGraphs

    entered: list[dict] = []

    class Graph:
        def pool(self) -> str:
            return f"pool of graph {len(entered)}"

        def replay(self) -> None:
            pass  # the fake capture ran the function eagerly: its outputs hold that run

    class Capture:
        def __init__(self, graph: Graph, **options: object) -> None:
            self.options = options

        def __enter__(self) -> None:
            assert CAPTURING.locked()
            entered.append(self.options)

        def __exit__(self, *exc: object) -> None:
            pass

    fake = SimpleNamespace(cuda=SimpleNamespace(CUDAGraph=Graph, graph=Capture), equal=torch.equal)
    graphs = LazyGraphs(fake, "the stream", "fake")
    outputs: list[object] = []

    def calls() -> None:
        for key, value in (("a", 1.0), ("b", 2.0), ("a", 3.0)):
            outputs.append(graphs.run(key, lambda s, v=value: s.fill_(v), lambda: torch.zeros(3),
                                      lambda s: (s * 2,)))  # fmt: skip

    worker = threading.Thread(target=calls, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "a capture took the process's capture lock twice and hung"
    assert not CAPTURING.locked() and graphs.enabled and graphs.stats()["graphs"] == 2
    # The third call replays "a" (no capture): this fake's replay writes nothing, so its
    # output is what the capture wrote, cloned.
    assert [o[0].tolist() for o in outputs] == [[2.0] * 3, [4.0] * 3, [2.0] * 3]
    assert graphs.replays == 1
    assert entered == [
        {"pool": None, "stream": "the stream", "capture_error_mode": "thread_local"},
        {"pool": "pool of graph 1", "stream": "the stream", "capture_error_mode": "thread_local"},
    ]
