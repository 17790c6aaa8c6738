"""The base of the network event sinks (mqtt, webhook): the event filter, and records queued
in an :class:`~vapipe.stages.events.outbox.Outbox` that a thread of the sink's own empties."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field, field_validator

from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.pipeline.validation import suggest
from vapipe.stages.events.outbox import Outbox
from vapipe.stages.events.records import EVENT_TYPES, Record, frame_records, message_record

log = logging.getLogger(__name__)


class OutboxConfig(StageConfig):
    """What every network event sink shares: the event filter and the outbox."""

    event_types: list[str] | None = None
    """Only these event types (``["line_cross", "zone_enter"]``); default: every event."""

    @field_validator("event_types")
    @classmethod
    def _known_types(cls, types: list[str] | None) -> list[str] | None:
        for kind in types or ():
            if kind not in EVENT_TYPES:  # a plugin's own type may still be right: warned
                log.warning(
                    "event_types: no built-in stage emits '%s'%s; known: %s",
                    kind, suggest(kind, EVENT_TYPES), ", ".join(EVENT_TYPES),
                )  # fmt: skip
        return types

    outbox_size: int = Field(10000, ge=1, le=10_000_000)
    """Events held while the peer is slow or down; beyond, the oldest are dropped."""
    drain_s: float = Field(5.0, ge=0)
    """At the end of the run, how long to keep trying to deliver what is queued."""


class OutboxSink(Stage):
    """Base of the network event sinks: filters records and queues them; subclasses send."""

    reads_pixels = False

    config: OutboxConfig
    outbox: Outbox
    writes_records = True
    _sender: Any = None
    """The thread that sends (a ``threading.Thread``), once open: None before."""

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.outbox = Outbox(self.config.outbox_size)

    def prepare(self, record: Record) -> Any:
        """What goes into the outbox for ``record`` (by default the record itself)."""
        return record

    def accept(self, record: Record) -> None:
        self._offer(record)

    def _offer(self, record: Record) -> None:
        types = self.config.event_types
        if types is None or record["event"] in types:
            self.outbox.put(self.prepare(record))

    def process(self, frame: Frame) -> tuple[Frame]:
        for record in frame_records(frame):
            self._offer(record)
        return (frame,)

    def handle_message(self, message: Message) -> tuple[Message]:
        self._offer(message_record(message))
        return (message,)
