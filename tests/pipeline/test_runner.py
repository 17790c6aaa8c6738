"""The runtime with stub stages: end-of-stream, flushing, errors, workers, max-frames."""

from __future__ import annotations

import pytest

from tests.pipeline.stubs import Batcher, Collect
from vapipe.pipeline import config, graph
from vapipe.pipeline.runner import Runner, RunResult


def run(text: str, **kwargs: object) -> RunResult:
    built = graph.build(config.parse(text, "t.toml"))
    return Runner(built, **kwargs).run(handle_signals=False)  # type: ignore[arg-type]


def test_eos_flushes_partial_batch_and_holding_stage() -> None:
    result = run("""\
links = ["src ! batch ! hold ! sink"]
[nodes.src]
type = "test-count"
count = 10
[nodes.batch]
type = "test-batch"
max_batch = 4
timeout_ms = 10000
[nodes.hold]
type = "test-hold"
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 0, result.error
    assert Batcher.instances["batch"].batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], (
        "the partial batch was not flushed at end-of-stream (or the runner waited the timeout)"
    )
    sink = Collect.instances["sink"]
    assert [item.seq for item in sink.items] == list(range(10)), "held items were not flushed"
    assert sink.flushed and sink.closed
    assert result.stats["wall_s"] < 5


def test_failing_stage_stops_run_with_exit_1_and_downstream_closes() -> None:
    result = run("""\
links = ["src ! bad ! sink"]
[nodes.src]
type = "test-count"
count = 100000
[nodes.bad]
type = "test-collect"
fail_at = 5
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 1
    assert str(result.error) == "stage 'bad' (source 'src', seq 5): boom"
    sink = Collect.instances["sink"]
    assert [item.seq for item in sink.items] == [0, 1, 2, 3, 4], "items before the error were lost"
    assert sink.closed and Collect.instances["bad"].closed
    assert result.stats["stages"]["src"]["frames"] < 100000, "the source was not stopped"


def test_workers_keep_input_order() -> None:
    result = run("""\
links = ["src ! work ! sink"]
[nodes.src]
type = "test-count"
count = 60
[nodes.work]
type = "test-collect"
workers = 3
delay_s = 0.002
jitter = true
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 0, result.error
    work = Collect.instances["work"]
    assert sorted(i.seq for i in work.items) == list(range(60))
    assert [i.seq for i in work.items] != list(range(60)), "workers did not overlap"
    assert [i.seq for i in Collect.instances["sink"].items] == list(range(60)), "order was lost"


def test_max_frames_stops_each_source() -> None:
    result = run(
        """\
links = ["a ! sink", "b ! sink"]
[nodes.a]
type = "test-count"
count = 50
[nodes.b]
type = "test-count"
count = 50
[nodes.sink]
type = "test-collect"
""",
        max_frames=7,
    )
    assert result.exit_code == 0
    items = Collect.instances["sink"].items
    assert sorted((i.source_id, i.seq) for i in items) == sorted(
        [(s, n) for s in ("a", "b") for n in range(7)]
    )


def test_request_stop_drains_and_reports_interrupt() -> None:
    built = graph.build(
        config.parse(
            """\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 100000
delay_s = 0.001
[nodes.sink]
type = "test-collect"
""",
            "t.toml",
        )
    )
    runner = Runner(built)

    def stop_soon(r: Runner) -> None:
        import threading

        def stop() -> None:
            r.interrupted = True
            r.request_stop("test")

        threading.Timer(0.2, stop).start()

    result = runner.run(handle_signals=False, on_started=stop_soon)
    assert result.exit_code == 130
    sink = Collect.instances["sink"]
    assert sink.closed and 0 < len(sink.items) < 100000
    assert [i.seq for i in sink.items] == list(range(len(sink.items))), "drain lost items"


def test_stats_have_queue_high_water_and_fps() -> None:
    result = run("""\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 20
[nodes.sink]
type = "test-collect"
delay_s = 0.005
[queues."src ! sink"]
size = 3
""")
    queue = result.stats["queues"]["src ! sink"]
    assert queue["high_water"] == 3 and queue["dropped"] == 0
    sink = result.stats["stages"]["sink"]
    assert sink["frames"] == 20 and sink["mean_ms"] >= 5.0
    assert sink["p95_ms"] >= sink["mean_ms"] * 0.5


@pytest.mark.parametrize("size", [1, 2])
def test_leaky_link_from_live_source_drops_and_counts(size: int) -> None:
    result = run(f"""\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 40
live = true
[nodes.sink]
type = "test-collect"
delay_s = 0.01
[queues."src ! sink"]
size = {size}
""")
    queue = result.stats["queues"]["src ! sink"]
    received = len(Collect.instances["sink"].items)
    assert queue["leaky"] == "downstream"
    assert queue["dropped"] > 0 and received + queue["dropped"] == 40
