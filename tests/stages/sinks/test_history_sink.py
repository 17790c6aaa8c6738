"""The history node's writer thread: events that come together are committed together and
each within commit_s, a failed commit does not stop the next, retention runs every minute;
and the node's contract with the graph (a records sink that reads no pixels)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.stages.events.test_history import T0, crossing
from tests.stages.sinks.config_bounds import assert_bounds
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.registry import lookup
from vapipe.stages.events.records import iso_time
from vapipe.stages.events.store import EventStore, records_in
from vapipe.stages.sinks.history import HistoryConfig, HistorySink


def sink(path: Path, **config: object) -> HistorySink:
    node = HistorySink("hist", HistoryConfig.model_validate({"path": str(path), **config}))
    node.open(None)  # type: ignore[arg-type]
    return node


def wait_for(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_the_contract_with_the_graph(tmp_path: Path) -> None:
    assert lookup("history") is HistorySink
    assert HistorySink.writes_records and not HistorySink.reads_pixels
    assert HistorySink.files_written(HistoryConfig(path="o/e.db"), ["cam"]) == [
        "o/e.db", "o/e.db-wal", "o/e.db-shm"]  # fmt: skip
    assert HistorySink("hist", HistoryConfig()).stats() == {"kept": 0, "non_finite": 0}
    cfg = HistoryConfig()
    assert (cfg.path, cfg.max_age_days, cfg.max_rows, cfg.commit_s) == (
        "out/events.db", 30.0, None, 0.5)  # fmt: skip
    for key, good, bad in (("max_age_days", [0.01], [0]), ("max_rows", [1], [0]),
                           ("commit_s", [0.01, 60], [0, 60.5])):  # fmt: skip
        assert_bounds(HistoryConfig, key, good, bad)


def test_a_file_that_is_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_bytes(b"not sqlite " * 200)
    with pytest.raises(ConfigError, match=r"cannot open the history .*events\.db"):
        sink(path)


def test_events_are_committed_within_commit_s_while_the_node_runs(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    node = sink(path, commit_s=0.05)
    assert node._thread.daemon
    node.accept(crossing(1, T0))
    reader = EventStore(path, readonly=True)
    wait_for(lambda: reader.count() == 1, "the event committed before the node closes")
    node.close()


def test_events_that_come_together_are_one_commit(tmp_path: Path) -> None:
    node = sink(tmp_path / "h.db", commit_s=30)
    batches: list[int] = []
    add = node.store.add
    node.store.add = lambda records, *more: batches.append(len(records)) or add(records, *more)  # type: ignore[method-assign, func-returns-value]
    node.accept(crossing(0, T0))
    wait_for(node._queue.empty, "the writer to take the first event")
    for seq in range(1, 5):
        node.accept(crossing(seq, T0))
    node.close()
    assert batches == [5]


def test_a_failed_commit_is_said_and_the_next_one_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "h.db"
    node = sink(path, commit_s=0.01)
    add = node.store.add
    calls = []

    def flaky(records, *more):  # type: ignore[no-untyped-def]
        calls.append(len(records))
        if len(calls) == 1:
            raise OSError("disk full")
        return add(records, *more)

    node.store.add = flaky  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR):
        node.accept(crossing(1, T0))
        wait_for(lambda: calls, "the first commit")
        node.accept(crossing(2, T0))
        node.close()
    assert [r["seq"] for r in records_in(path)] == [2]
    assert any("1 events not kept (disk full)" in r.getMessage() for r in caplog.records)


def test_retention_runs_again_a_minute_after_the_last_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "h.db"
    with caplog.at_level(logging.INFO):
        node = sink(path, max_rows=2)
    assert not [r for r in caplog.records if "retention" in r.getMessage()]
    for seq in range(4):
        node.accept(crossing(seq, T0 + seq))
    node.close()  # pruned at start only: a minute has not passed
    assert len(list(records_in(path))) == 4
    with caplog.at_level(logging.INFO):
        node = sink(path, max_rows=3)  # at start: 4 -> 3
    assert any("1 events past retention" in r.getMessage() for r in caplog.records)
    node._pruned_at = time.monotonic() - 61  # as if a minute had passed
    node.accept(crossing(9, T0 + 9))
    node.close()
    assert [r["seq"] for r in records_in(path)] == [2, 3, 9]


def test_any_event_but_frames_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    node = sink(path)
    node.accept({"event": "alarm", "source_id": "cam", "seq": 1, "time": iso_time(T0)})
    node.accept({"event": "frame", "source_id": "cam", "seq": 1, "time": iso_time(T0)})
    node.close()
    assert [r["event"] for r in records_in(path)] == ["alarm"]
