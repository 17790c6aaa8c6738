"""The base of the sinks that write a file per event (snapshots, clips): their keys, their
media folder checked, retention applied, and a writer thread that never holds the pipeline up."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic

from pydantic import Field, field_validator

from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.stages.media.files import Item, Retention, Writer
from vapipe.stages.media.paths import check_writable

log = logging.getLogger(__name__)

DEFAULT_EVENTS = ("line_cross", "zone_enter", "zone_dwell")
ANALYTICS_EVENTS = (
    "line_cross", "zone_enter", "zone_exit", "zone_dwell", "zone_crowded", "zone_clear",
    "plate",
)  # fmt: skip


class MediaConfig(StageConfig):
    """Keys every media sink (snapshots, clips) has."""

    dir: str = "out/media"
    """The media folder. Events carry their files' paths relative to it, and
    ``run-pipeline serve`` serves it under ``/media/``."""
    event_types: list[str] = Field(default_factory=lambda: list(DEFAULT_EVENTS))
    """The analytics events that get a file (any of: line_cross, zone_enter, zone_exit,
    zone_dwell, zone_crowded, zone_clear; plate, from a plates node: its crop is the
    plate)."""
    queue: int = Field(64, ge=1, le=10_000)
    """Files waiting for the writer thread; when it is full, new ones are dropped and counted
    (the pipeline never waits for the disk)."""
    max_age_days: float | None = Field(None, gt=0)
    """Delete this node's files older than this (oldest first). Default: kept."""
    max_bytes: int | None = Field(None, gt=0)
    """Delete this node's oldest files while all of them take more than this. Default: no
    limit."""

    @field_validator("event_types")
    @classmethod
    def _analytics_events(cls, event_types: list[str]) -> list[str]:
        for kind in event_types:
            if kind not in ANALYTICS_EVENTS:
                known = ", ".join(ANALYTICS_EVENTS)
                raise ValueError(f"'{kind}' is not an analytics event ({known})")
        return event_types


class MediaSink(Stage, Generic[Item]):
    """A node that writes a file per event under its media folder: the folder checked, its
    retention applied at start and after each file, a writer thread doing ``write``."""

    config: MediaConfig
    writer: Writer[Item] | None = None
    """The writer thread's end, once open."""

    @classmethod
    def media_folder(cls, config: MediaConfig) -> str | None:
        return config.dir

    @classmethod
    def writes_pictures(cls, config: MediaConfig) -> bool:
        return True

    def open_media(self, write: Callable[[Item], None]) -> None:
        cfg = self.config
        self.root = Path(cfg.dir)
        check_writable(self.root / ".probe")
        max_age_s = None if cfg.max_age_days is None else cfg.max_age_days * 86400
        self.retention = Retention(self.root, self.name, max_age_s, cfg.max_bytes)
        self.retention.prune()
        self.event_types = frozenset(cfg.event_types)
        self.writer = Writer(f"{self.name}-writer", cfg.queue, write)

    def submit(self, item: Item) -> bool:
        """Hands ``item`` to the writer thread; False when it was dropped (a full queue)."""
        if self.writer is None:
            raise RuntimeError(f"{self.name}: not open")
        return self.writer.submit(item)

    def close_writer(self) -> Writer[Item] | None:
        writer = self.writer
        if writer is not None:
            writer.close()
            if writer.dropped:
                log.warning(
                    "%s: %d files dropped (the writer fell behind; queue = %d)",
                    self.name, writer.dropped, self.config.queue,
                )  # fmt: skip
        return writer

    def stats(self) -> dict[str, Any]:
        writer = self.writer
        if writer is None:
            return {}
        return {
            "written": writer.done,
            "dropped": writer.dropped,
            "failed": writer.failed,
            "deleted": self.retention.deleted,
        }
