"""The event history in SQLite (stdlib ``sqlite3``, WAL): one writer, any number of readers
(the service's API), indexes on time, source, type, line and zone, retention by age and by
rows. Every event but ``frame`` is kept, whole, as its JSON; the columns are for searching."""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from vapipe.stages.events.records import NonFinite, Record, to_json
from vapipe.stages.plates.text import distance, normalised

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    rowid INTEGER PRIMARY KEY,
    id TEXT UNIQUE,
    time REAL NOT NULL,
    source TEXT NOT NULL,
    type TEXT NOT NULL,
    line TEXT,
    zone TEXT,
    track INTEGER,
    class TEXT,
    direction TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_time ON events (time);
CREATE INDEX IF NOT EXISTS events_source_time ON events (source, time);
CREATE INDEX IF NOT EXISTS events_type_time ON events (type, time);
CREATE INDEX IF NOT EXISTS events_line_time ON events (line, time) WHERE line IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_zone_time ON events (zone, time) WHERE zone IS NOT NULL;
"""
BUSY_MS = 5000
"""How long a reader waits for the writer's lock (WAL readers rarely do)."""


def epoch_of(iso: str) -> float:
    """``2026-12-04T08:27:42.655Z`` -> seconds since 1970."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def row_of(record: Record, non_finite: NonFinite | None = None) -> tuple[Any, ...]:
    return (
        record.get("id"),
        epoch_of(str(record["time"])),
        str(record["source_id"]),
        str(record["event"]),
        record.get("line"),
        record.get("zone"),
        record.get("track_id"),
        record.get("class_name"),
        record.get("direction"),
        to_json(record, non_finite),
    )


@dataclass(frozen=True)
class Query:
    """``GET /api/events/history``'s filters; ``cursor`` is the last page's ``next``."""

    source: str | None = None
    type: str | None = None
    line: str | None = None
    zone: str | None = None
    attribute: str | None = None
    """A label or name a model on the objects gave (``taxi``, ``alice``), any node's, or
    ``NODE:VALUE`` for one node's (``faceid:alice``)."""
    plate: str | None = None
    """A licence plate (``KX-4921``; case, spaces and dashes do not matter): plate events of
    it and events whose object carried it."""
    plate_distance: int = 0
    """With ``plate``: also plates this many characters apart (a misread, a typo)."""
    since: float | None = None
    until: float | None = None
    limit: int = 100
    cursor: str | None = None


class BadCursor(ValueError):
    """A cursor this store never gave."""


def connect(path: str | Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True,
                             check_same_thread=False)  # fmt: skip
    else:
        db = sqlite3.connect(path, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses at most the last commit
        db.executescript(SCHEMA)
    db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    db.create_function("plate_distance", 2, _plate_distance, deterministic=True)
    return db


def _plate_distance(stored: Any, wanted: Any) -> int | None:
    """SQL ``plate_distance(a, b)``: characters apart (None where a is no text)."""
    return distance(stored, wanted) if isinstance(stored, str) else None


class EventStore:
    """One connection; the writer's (``add``, ``prune``) or a reader's (the rest)."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.db = connect(path, readonly=readonly)

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.db.close()

    def add(self, records: Iterable[Record], non_finite: NonFinite | None = None) -> int:
        """Keep these events (one transaction); one already kept (the same ``id``: a
        restarted shard's repeat) is not kept twice. Returns how many were new."""
        rows = [row_of(record, non_finite) for record in records if record.get("event") != "frame"]
        with self.db:
            before = self.db.total_changes
            self.db.executemany(
                "INSERT OR IGNORE INTO events (id, time, source, type, line, zone, track, class, "
                "direction, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            return self.db.total_changes - before

    def prune(self, *, older_than: float | None = None, max_rows: int | None = None) -> int:
        """Delete events before ``older_than`` (epoch s), then the oldest beyond ``max_rows``."""
        with self.db:
            deleted = 0
            if older_than is not None:
                deleted += self.db.execute(
                    "DELETE FROM events WHERE time < ?", (older_than,)
                ).rowcount
            if max_rows is not None:
                deleted += self.db.execute(
                    "DELETE FROM events WHERE rowid IN (SELECT rowid FROM events "
                    "ORDER BY time DESC, rowid DESC LIMIT -1 OFFSET ?)",
                    (max_rows,),
                ).rowcount
        return deleted

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def history(self, query: Query) -> tuple[list[Record], str | None]:
        """Events matching ``query``, newest first, and the cursor of the next page (None on
        the last)."""
        where, args = _filters(query)
        if query.cursor is not None:
            try:
                time_s, rowid = query.cursor.split("_")
                at, row = float(time_s), int(rowid)
                # Only what this store could have given: SQLite's rows are 64-bit.
                if not math.isfinite(at) or not 0 <= row < 2**63:
                    raise ValueError(query.cursor)
                args += [at, at, row]
            except ValueError:
                shown = query.cursor if len(query.cursor) <= 60 else query.cursor[:57] + "..."
                raise BadCursor(f"cursor '{shown}' is not one this service gave") from None
            where.append("(time < ? OR (time = ? AND rowid < ?))")
        sql = "SELECT rowid, time, record FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY time DESC, rowid DESC LIMIT ?"
        rows = self.db.execute(sql, [*args, query.limit + 1]).fetchall()
        page = [json.loads(record) for _, _, record in rows[: query.limit]]
        following = None
        if len(rows) > query.limit:
            rowid, time_s, _ = rows[query.limit - 1]
            following = f"{time_s!r}_{rowid}"
        return page, following

    def get(self, event_id: str) -> Record | None:
        row = self.db.execute("SELECT record FROM events WHERE id = ?", (event_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def counts(
        self,
        line: str,
        bucket_s: float,
        since: float | None = None,
        until: float | None = None,
        source: str | None = None,
    ) -> list[dict[str, Any]]:
        """Crossings of ``line`` per ``bucket_s`` (buckets aligned to the epoch), oldest first:
        ``{"start": epoch s, "counts": {direction: {class: n}}, "total": n}``; buckets with none
        are left out."""
        where, args = _filters(Query(source=source, type="line_cross", line=line, since=since,
                                     until=until))  # fmt: skip
        rows = self.db.execute(
            "SELECT CAST(time / ? AS INTEGER) AS bucket, direction, class, COUNT(*) FROM events "
            f"WHERE {' AND '.join(where)} GROUP BY bucket, direction, class ORDER BY bucket",
            [bucket_s, *args],
        ).fetchall()
        buckets: dict[int, dict[str, Any]] = {}
        for bucket, direction, kind, count in rows:
            entry = buckets.setdefault(
                bucket, {"start": bucket * bucket_s, "counts": {}, "total": 0}
            )
            entry["counts"].setdefault(direction or "-", {})[kind or "-"] = count
            entry["total"] += count
        return list(buckets.values())

    def lines(self) -> list[str]:
        return [row[0] for row in self.db.execute(
            "SELECT DISTINCT line FROM events WHERE line IS NOT NULL ORDER BY line")]  # fmt: skip


def _filters(query: Query) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("source", query.source),
        ("type", query.type),
        ("line", query.line),
        ("zone", query.zone),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if query.attribute is not None:
        node, _, value = query.attribute.rpartition(":")
        where.append(
            "EXISTS (SELECT 1 FROM json_each(record, '$.attributes') AS a WHERE "
            "(json_extract(a.value, '$.label') = ? OR json_extract(a.value, '$.name') = ?)"
            + (" AND a.key = ?)" if node else ")")
        )
        args.extend([value, value, *([node] if node else [])])
    if query.plate is not None:
        wanted = normalised(query.plate)
        test, values = (
            ("plate_distance({}, ?) <= ?", [wanted, query.plate_distance])
            if query.plate_distance
            else ("{} = ?", [wanted])
        )
        # The plate event's own text, or a plate among the object's attributes.
        own, carried = "json_extract(record, '$.plate')", "json_extract(a.value, '$.plate')"
        where.append(
            f"({test.format(own)} OR EXISTS (SELECT 1 FROM json_each(record, '$.attributes') "
            f"AS a WHERE {test.format(carried)}))"
        )
        args.extend([*values, *values])
    if query.since is not None:
        where.append("time >= ?")
        args.append(query.since)
    if query.until is not None:
        where.append("time < ?")
        args.append(query.until)
    return where, args


def records_in(path: Path) -> Iterator[Record]:
    """Every kept event, oldest first (for tests and exports)."""
    store = EventStore(path, readonly=True)
    try:
        for (record,) in store.db.execute("SELECT record FROM events ORDER BY time, rowid"):
            yield json.loads(record)
    finally:
        store.close()
