"""The event history: kept in SQLite across runs, searched newest first by page, counted per
line over time, pruned by age and rows; the node's writer thread keeps every event but frames."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.stages.events.records import iso_time
from vapipe.stages.events.store import BadCursor, EventStore, Query, epoch_of, records_in
from vapipe.stages.sinks.history import HistoryConfig, HistorySink

T0 = 1_796_000_000.0


def crossing(seq: int, at: float, *, line: str = "road", direction: str = "in",
             kind: str = "car", source: str = "cam") -> dict[str, object]:  # fmt: skip
    return {
        "event": "line_cross",
        "id": f"{source}/{seq}/line_cross/{seq}/{line}",
        "source_id": source,
        "seq": seq,
        "pts": seq / 10,
        "time": iso_time(at),
        "track_id": seq,
        "class_name": kind,
        "line": line,
        "direction": direction,
        "counts": {},
    }


def entered(seq: int, at: float, zone: str = "yard") -> dict[str, object]:
    return {
        "event": "zone_enter", "id": f"cam/{seq}/zone_enter/1/{zone}", "source_id": "cam",
        "seq": seq, "pts": 0.0, "time": iso_time(at), "track_id": 1, "class_name": "person",
        "zone": zone,
    }  # fmt: skip


def test_pages_go_newest_first_and_the_cursor_walks_them_all(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    # two at the same millisecond: the cursor must neither skip nor repeat one
    records = [crossing(i, T0 + (i // 2)) for i in range(7)]
    assert store.add(records) == 7
    seen, cursor, pages = [], None, 0
    while True:
        page, cursor = store.history(Query(limit=3, cursor=cursor))
        seen += [r["seq"] for r in page]
        pages += 1
        if cursor is None:
            break
    assert seen == [6, 5, 4, 3, 2, 1, 0]
    assert pages == 3
    assert store.history(Query(limit=7))[1] is None  # exactly one page: no next
    with pytest.raises(BadCursor):
        store.history(Query(cursor="yesterday"))


def test_filters_narrow_by_source_type_line_zone_and_time(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    store.add([
        crossing(1, T0), crossing(2, T0 + 10, line="gate"), crossing(3, T0 + 20, source="b"),
        entered(4, T0 + 30), {"event": "frame", "source_id": "cam", "seq": 5, "time": iso_time(T0)},
    ])  # fmt: skip

    def seqs(**query: object) -> list[int]:
        return [r["seq"] for r in store.history(Query(**query))[0]]  # type: ignore[arg-type] - test filters

    assert seqs() == [4, 3, 2, 1]  # frames are never kept
    assert seqs(source="b") == [3]
    assert seqs(type="zone_enter") == [4]
    assert seqs(line="gate") == [2]
    assert seqs(zone="yard") == [4]
    assert seqs(since=T0 + 10) == [4, 3, 2]
    assert seqs(until=T0 + 10) == [1]  # until is exclusive
    assert seqs(since=T0 + 10, until=T0 + 30, source="cam") == [2]


def test_an_event_kept_twice_is_one_event_and_found_by_id(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    assert store.add([crossing(1, T0), crossing(2, T0)]) == 2
    assert store.add([crossing(2, T0), crossing(3, T0)]) == 1  # a restarted shard's repeat
    assert store.count() == 3
    assert store.get("cam/2/line_cross/2/road") == crossing(2, T0)
    assert store.get("cam/9/line_cross/9/road") is None


def test_counts_per_bucket_direction_and_class(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    start = 1_796_000_100.0  # a multiple of 300: buckets start on the clock's 5 minutes
    store.add([
        crossing(1, start + 1), crossing(2, start + 299, direction="out"),
        crossing(3, start + 299.5, kind="truck"), crossing(4, start + 300),
        crossing(5, start + 1000), crossing(6, start + 2, line="gate"),
    ])  # fmt: skip
    buckets = store.counts("road", 300)
    assert buckets == [
        {"start": start, "counts": {"in": {"car": 1, "truck": 1}, "out": {"car": 1}}, "total": 3},
        {"start": start + 300, "counts": {"in": {"car": 1}}, "total": 1},
        {"start": start + 900, "counts": {"in": {"car": 1}}, "total": 1},
    ]
    assert [b["total"] for b in store.counts("road", 300, since=start + 300)] == [1, 1]
    assert store.counts("road", 300, source="other") == []
    assert store.lines() == ["gate", "road"]


def test_pruning_by_age_then_rows_deletes_the_oldest(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    store.add([crossing(i, T0 + i) for i in range(10)])
    assert store.prune(older_than=T0 + 3) == 3
    assert store.prune(max_rows=4) == 3
    assert [r["seq"] for r in store.history(Query())[0]] == [9, 8, 7, 6]
    assert store.prune(older_than=T0, max_rows=4) == 0


def test_readers_see_the_writers_commits_while_it_is_open(tmp_path: Path) -> None:
    writer = EventStore(tmp_path / "h.db")
    assert writer.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reader = EventStore(tmp_path / "h.db", readonly=True)
    writer.add([crossing(1, T0)])
    assert reader.count() == 1
    with pytest.raises(sqlite3.OperationalError):
        reader.add([crossing(2, T0)])


def sink(path: Path, **config: object) -> HistorySink:
    node = HistorySink("hist", HistoryConfig.model_validate({"path": str(path), **config}))
    node.open(None)  # type: ignore[arg-type]
    return node


def test_the_node_keeps_frame_events_and_messages_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "out" / "events.db"
    node = sink(path)
    info = StreamInfo("cam", "x", 64, 64, None)
    frame = Frame("cam", 3, 0.3, T0, None, info)  # type: ignore[arg-type] - no picture needed
    frame.events.append({"event": "line_cross", "track_id": 2, "class_name": "car",
                         "line": "road", "direction": "in", "counts": {"in": 1}})  # fmt: skip
    node.process(frame)
    node.handle_message(Message("cam", "source_down", T0 + 1, 3, 0.3, {"reason": "gone"}))
    node.accept({"event": "frame", "source_id": "cam", "seq": 4, "time": iso_time(T0)})
    node.close()
    assert node.stats() == {"kept": 2, "non_finite": 0}
    kept = list(records_in(path))
    assert [r["event"] for r in kept] == ["line_cross", "source_down"]
    assert kept[0]["id"] == "cam/3/line_cross/2/road" and epoch_of(kept[0]["time"]) == T0
    again = sink(path)  # a restart finds them, and adds to them
    again.accept(crossing(9, T0 + 5))
    again.close()
    assert [r["seq"] for r in records_in(path)] == [3, 3, 9]


def test_the_node_prunes_at_start(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = EventStore(path)
    store.add([crossing(1, T0 - 40 * 86400), crossing(2, T0)])  # T0 is in the past too
    store.close()
    sink(path, max_age_days=10 * 365).close()
    assert [r["seq"] for r in records_in(path)] == [1, 2]
    sink(path, max_age_days=30).close()
    assert [r["seq"] for r in records_in(path)] == [2]
    store = EventStore(path)
    store.add([crossing(i, T0 + i) for i in range(5)])
    store.close()
    sink(path, max_age_days=None, max_rows=2).close()
    assert [r["seq"] for r in records_in(path)] == [3, 4]
