"""Edges of the event store: its default page, any event type but frames, its readers'
patience with the writer."""

from __future__ import annotations

from pathlib import Path

from tests.stages.events.test_history import T0, crossing
from vapipe.stages.events.records import iso_time
from vapipe.stages.events.store import EventStore, Query


def test_a_page_is_100_events_unless_asked(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    store.add([crossing(i, T0 + i) for i in range(150)])
    page, following = store.history(Query())
    assert len(page) == 100 and following is not None
    assert len(store.history(Query(limit=150))[0]) == 150


def test_any_event_type_but_frame_is_kept(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "h.db")
    plugin = {"event": "alarm", "source_id": "cam", "seq": 1, "time": iso_time(T0)}
    frame = {"event": "frame", "source_id": "cam", "seq": 1, "time": iso_time(T0)}
    assert store.add([plugin, frame]) == 1
    assert store.history(Query())[0] == [plugin]


def test_readers_wait_for_the_writers_lock(tmp_path: Path) -> None:
    EventStore(tmp_path / "h.db").close()
    reader = EventStore(tmp_path / "h.db", readonly=True)
    assert reader.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
