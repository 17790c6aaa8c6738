"""The ``history`` node: every event but ``frame`` kept in SQLite, so that they outlive the
run (``run-pipeline serve`` answers ``/api/events/history`` and ``/api/counts`` from it, and a
file run's counts over time need no service). One writer thread commits what came in the
last ``commit_s``; retention prunes by age and by rows."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.events.records import NonFinite, Record, frame_records, message_record
from vapipe.stages.events.store import EventStore
from vapipe.stages.media.paths import check_writable

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 60.0


class HistoryConfig(StageConfig):
    """Where the database is and how long events stay in it."""

    path: str = "out/events.db"
    """The SQLite file (with ``-wal`` and ``-shm`` beside it while open). Events of earlier
    runs stay: a restarted service finds its history."""
    max_age_days: float | None = Field(30.0, gt=0)
    """Events older than this are deleted (checked at start and every minute); None keeps
    them."""
    max_rows: int | None = Field(None, gt=0)
    """At most this many events; the oldest go first. Default: no limit."""
    commit_s: float = Field(0.5, gt=0, le=60)
    """Events are committed together at most this long after they came."""


@register("history")
class HistorySink(Stage):
    """Keeps events in SQLite; frames pass on."""

    reads_pixels = False
    writes_records = True

    Config = HistoryConfig
    config: HistoryConfig
    kept = 0
    non_finite: NonFinite | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def history_file(cls, config: HistoryConfig) -> str | None:
        return config.path

    @classmethod
    def files_written(cls, config: HistoryConfig, source_ids: Sequence[str]) -> list[str | Names]:
        return [config.path, f"{config.path}-wal", f"{config.path}-shm"]

    def open(self, context: StageContext) -> None:
        path = Path(self.config.path)
        check_writable(path)
        try:
            self.store = EventStore(path)
        except Exception as exc:  # sqlite3.Error: a file that is not a database, say
            raise ConfigError(f"cannot open the history {path}: {exc}", key="path") from None
        self.kept = 0
        self.non_finite = NonFinite(self.name)
        self._queue: queue.Queue[Record | None] = queue.Queue()
        self._pruned_at = 0.0
        self._prune()
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-writer", daemon=True)
        self._thread.start()

    def _prune(self) -> None:
        cfg = self.config
        older = None if cfg.max_age_days is None else time.time() - cfg.max_age_days * 86400
        deleted = self.store.prune(older_than=older, max_rows=cfg.max_rows)
        if deleted:
            log.info("%s: %d events past retention deleted", self.name, deleted)
        self._pruned_at = time.monotonic()

    def _run(self) -> None:
        done = False
        while not done:
            batch: list[Record] = []
            item = self._queue.get()
            deadline = time.monotonic() + self.config.commit_s
            while item is not None:
                batch.append(item)
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            done = item is None
            if batch:
                try:
                    self.kept += self.store.add(batch, self.non_finite)
                except Exception as exc:  # a full disk: said, and the next batch tried
                    log.error("%s: %d events not kept (%s)", self.name, len(batch), exc)
            if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
                self._prune()

    def accept(self, record: Record) -> None:
        if record["event"] != "frame":
            self._queue.put(record)

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.events:
            for record in frame_records(frame, empty_frames=False):
                self.accept(record)
        return (frame,)

    def handle_message(self, message: Message) -> tuple[Message]:
        self.accept(message_record(message))
        return (message,)

    def close(self) -> None:
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()
            self.store.close()

    def stats(self) -> dict[str, Any]:
        return {"kept": self.kept, "non_finite": self.non_finite.count if self.non_finite else 0}
