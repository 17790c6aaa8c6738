"""The runtime with stub stages: end-of-stream, flushing, errors, workers, max-frames."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.pipeline.stubs import Batcher, Collect
from vapipe.pipeline import config, graph
from vapipe.pipeline.outcome import RunResult
from vapipe.pipeline.runner import Runner


class Ran:
    """A finished run: its result, and each node's stage object (the stubs record items)."""

    def __init__(self, result: RunResult, runner: Runner) -> None:
        self.result = result
        self.runner = runner
        self.exit_code, self.error, self.stats = result.exit_code, result.error, result.stats

    def collect(self, name: str) -> Collect:
        stage = self.runner.stages[name]
        assert isinstance(stage, Collect)
        return stage

    def seqs(self, name: str) -> list[int]:
        return [item.seq for item in self.collect(name).items]


def run(text: str, on_started: Callable[[Runner], None] | None = None, **kwargs: object) -> Ran:
    built = graph.build(config.parse(text, "t.toml"))
    runner = Runner(built, **kwargs)  # type: ignore[arg-type]
    return Ran(runner.run(handle_signals=False, on_started=on_started), runner)


def test_eos_flushes_partial_batch_and_holding_stage() -> None:
    result = run("""\
links = ["src ! batch ! hold ! sink"]
[nodes.src]
type = "test-count"
count = 10
[nodes.batch]
type = "test-batch"
max_batch = 4
timeout_ms = 3600000
[nodes.hold]
type = "test-hold"
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 0, result.error
    # With an hour's batch timeout, only end-of-stream can release the last batch (a runner
    # that waited for it would hit pytest's timeout instead).
    batcher = result.runner.stages["batch"]
    assert isinstance(batcher, Batcher)
    assert batcher.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], "partial batch not flushed"
    sink = result.collect("sink")
    assert result.seqs("sink") == list(range(10)), "held items were not flushed"
    assert sink.flushed and sink.closed


def test_a_source_may_give_a_plain_iterator() -> None:
    result = run("""\
links = ["src ! sink"]
[nodes.src]
type = "test-list"
count = 5
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 0, result.error
    assert result.seqs("sink") == list(range(5))


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
    assert result.seqs("sink") == [0, 1, 2, 3, 4], "items before the error were lost"
    assert result.collect("sink").closed and result.collect("bad").closed
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
    work = result.seqs("work")
    assert sorted(work) == list(range(60))
    assert work != list(range(60)), "workers did not overlap"
    assert result.seqs("sink") == list(range(60)), "order was lost"


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
    items = result.collect("sink").items
    assert sorted((i.source_id, i.seq) for i in items) == sorted(
        [(s, n) for s in ("a", "b") for n in range(7)]
    )


def stop_after(items: int, sink: str = "sink") -> Callable[[Runner], None]:
    """An on_started hook: a thread that asks the runner to stop (as Ctrl-C does) once
    ``sink`` has handled ``items`` items."""

    def start(runner: Runner) -> None:
        def watch() -> None:
            stage = runner.stages[sink]
            while len(getattr(stage, "items", ())) < items and not runner.stop_requested.is_set():
                time.sleep(0.005)
            runner.interrupted = True
            runner.request_stop("test")

        threading.Thread(target=watch, daemon=True).start()

    return start


def test_request_stop_drains_and_reports_interrupt() -> None:
    result = run(
        """\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 100000
delay_s = 0.001
[nodes.sink]
type = "test-collect"
""",
        on_started=stop_after(20),
    )
    assert result.exit_code == 130
    sink = result.collect("sink")
    assert sink.closed and 20 <= len(sink.items) < 100000
    assert result.seqs("sink") == list(range(len(sink.items))), "drain lost items"


SLOW_SINK = """\
links = ["src ! sink"]
[pipeline]
drain_timeout_s = 0.3
[nodes.src]
type = "test-count"
count = 100000
[nodes.sink]
type = "test-collect"
delay_s = {delay_s}
"""


def test_drain_timeout_aborts_a_drain_that_would_take_too_long() -> None:
    # 40 items queued before a sink that takes 0.2 s each: a full drain needs 8 s; the
    # 0.3 s drain timeout must abort the queues and drop the rest instead.
    result = run(SLOW_SINK.format(delay_s=0.2) + '[queues."src ! sink"]\nsize = 40\n',
                 on_started=stop_after(1))  # fmt: skip
    assert result.exit_code == 130
    handled = len(result.collect("sink").items)
    # The first item, and fewer than the 40 queued behind it: aborted, not drained.
    assert handled < 41, f"{handled} items: the queue was drained, not aborted"
    assert result.collect("sink").closed


def test_a_drain_timeout_names_the_stage_that_did_not_drain_and_where_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A sink that holds each item 2 s: at the 0.3 s timeout it is inside process(), and the
    # log says so, with the line it is at (what a hung shard's log needs to show).
    with caplog.at_level("WARNING", logger="vapipe.pipeline.runner"):
        result = run(SLOW_SINK.format(delay_s=2.0), on_started=stop_after(1))
    assert result.exit_code == 130
    lines = [record.getMessage() for record in caplog.records]
    # The source may have ended at the stop already, or still wait on the full queue.
    assert any(
        line in ("stages did not drain within 0 s (src, sink); aborting",
                 "stages did not drain within 0 s (sink); aborting")
        for line in lines
    ), lines  # fmt: skip
    stack = next(line for line in lines if line.startswith("thread sink"))
    assert "stubs.py" in stack and "in process\n    time.sleep(delay)" in stack, stack


@pytest.mark.parametrize("where", ["flush", "close"])
def test_error_in_flush_or_close_fails_the_run_and_keeps_what_came_before(where: str) -> None:
    result = run(f"""\
links = ["src ! bad ! sink"]
[nodes.src]
type = "test-count"
count = 5
[nodes.bad]
type = "test-collect"
fail_in = "{where}"
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 1
    assert str(result.error) == f"stage 'bad': {where} failed"
    assert result.seqs("sink") == [0, 1, 2, 3, 4]
    assert result.collect("sink").closed and result.collect("bad").closed


def test_failing_multi_worker_stage_stops_cleanly_and_keeps_order() -> None:
    result = run("""\
links = ["src ! work ! sink"]
[nodes.src]
type = "test-count"
count = 100000
[nodes.work]
type = "test-collect"
workers = 3
fail_at = 30
delay_s = 0.001
jitter = true
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 1
    assert str(result.error) == "stage 'work' (source 'src', seq 30): boom"
    seqs = result.seqs("sink")
    assert seqs[:30] == list(range(30)), "items before the failure were lost or reordered"
    assert 30 not in seqs and seqs == sorted(seqs)
    assert result.collect("sink").closed and result.collect("work").closed


def test_a_failed_open_closes_the_stages_already_opened() -> None:
    result = run("""\
links = ["src ! bad ! sink"]
[nodes.src]
type = "test-count"
[nodes.bad]
type = "test-collect"
fail_in = "open"
[nodes.sink]
type = "test-collect"
""")
    assert result.exit_code == 1
    assert str(result.error) == "stage 'bad': cannot open"
    sink = result.collect("sink")
    assert sink.opened and sink.closed, "the sink opened before 'bad' was never closed"
    assert not result.stats["started"]


def test_fan_in_is_fair_to_every_link() -> None:
    # Both sources can fill their links at once; a consumer that always served the first
    # link would take all of a's items before any of b's.
    result = run("""\
links = ["a ! sink", "b ! sink"]
[nodes.a]
type = "test-count"
count = 200
[nodes.b]
type = "test-count"
count = 200
[nodes.sink]
type = "test-collect"
delay_s = 0.0005
""")
    assert result.exit_code == 0
    order = [item.source_id for item in result.collect("sink").items]
    first_b = order.index("b")
    assert first_b < 20, f"b waited for {first_b} items of a"
    window = order[:100]
    assert 30 <= window.count("b") <= 70, f"unfair split in the first 100: {window.count('b')}"


def test_stats_have_queue_high_water_and_fps() -> None:
    result_started = time.time()
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
    # When it worked, in epoch seconds (a parent unites its shards' spans), and fps over it.
    first, last = sink["active_s"]
    assert result_started <= first < last <= time.time()
    assert sink["fps"] == pytest.approx(20 / (last - first), rel=0.01)


def test_stats_say_how_long_each_stage_took_to_open() -> None:
    result = run("""\
links = ["src ! slow ! fast"]
[nodes.src]
type = "test-count"
count = 3
[nodes.slow]
type = "test-collect"
open_delay_s = 0.3
[nodes.fast]
type = "test-collect"
""")
    stages = result.stats["stages"]
    assert stages["slow"]["open_s"] >= 0.3 > stages["fast"]["open_s"]
    assert result.stats["open_s"] == pytest.approx(sum(s["open_s"] for s in stages.values()))


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
    received = len(result.collect("sink").items)
    assert queue["leaky"] == "downstream"
    assert queue["dropped"] > 0 and received + queue["dropped"] == 40


def test_a_stage_thread_stuck_past_its_run_is_reported_until_it_ends() -> None:
    from tests.pipeline import stubs
    from vapipe.pipeline import lingering

    def stop_when_stuck(runner: Runner) -> None:
        def stop() -> None:
            stubs.STUCK_ENTERED.wait(60)
            runner.request_stop("test")

        threading.Thread(target=stop, daemon=True).start()

    stubs.STUCK_RELEASE.clear()
    try:
        result = run(
            # A short drain timeout: the stage is past it either way, and the run ends 30 s
            # sooner.
            'links = ["src ! sink"]\n[pipeline]\ndrain_timeout_s = 1\n'
            '[nodes.src]\ntype = "test-stuck"\n[nodes.sink]\ntype = "test-collect"\n',
            on_started=stop_when_stuck,
        )
        assert result.exit_code == 0  # request_stop is not a Ctrl-C
        stuck = lingering.alive()
        assert [thread.name for thread in stuck] == ["src"], stuck
    finally:
        stubs.STUCK_RELEASE.set()
    stuck[0].join(30)
    assert lingering.alive() == [], "a thread that ended is not reported"


def test_a_batch_keeps_its_messages_between_the_items_they_came_between() -> None:
    from tests.pipeline.stubs import BatchLog

    # The stage holds its first item until the source has sent everything: its second batch
    # is the other 11 items and 6 messages, which it must take in the order they came.
    result = run("""\
links = ["src ! log ! after"]
[pipeline]
queue_size = 64
[nodes.src]
type = "test-messages"
count = 12
every = 2
[nodes.log]
type = "test-batch-log"
max_batch = 64
timeout_ms = 0
[nodes.after]
type = "test-log"
""")
    assert result.exit_code == 0, result.error
    log = result.runner.stages["log"]
    assert isinstance(log, BatchLog)
    expected: list[object] = []
    for seq in range(12):
        expected.append(seq)
        if seq % 2:
            expected.append(f"after-{seq}")
    assert log.log == expected
    assert all(len(batch) <= 2 for batch in log.batches), "a batch ran over a message"
    after = result.runner.stages["after"]
    assert [entry[2] for entry in after.log] == expected  # type: ignore[attr-defined]


def test_in_order_splits_a_batch_at_each_message() -> None:
    from vapipe.pipeline.frame import Message, in_order

    down, up = Message("a", "source_down", 0.0), Message("a", "source_up", 0.0)
    assert in_order([1, 2, down, 3, up]) == [[1, 2], down, [3], up]
    assert in_order([down, up, 4]) == [down, up, [4]]
    assert in_order([5, 6]) == [[5, 6]] and in_order([]) == []
