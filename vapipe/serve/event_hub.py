"""Events handed to live subscribers (the service's Server-Sent Events): each subscriber has
a bounded buffer of its own; one that reads too slowly loses its oldest events, counted,
and never slows the pipeline down."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Subscriber:
    """One reader: the events it wants (by source and type), waiting for it."""

    source: str | None = None
    kinds: frozenset[str] | None = None
    size: int = 1000
    dropped: int = 0
    buffer: deque[dict[str, Any]] = field(default_factory=deque)
    wake: threading.Event = field(default_factory=threading.Event)

    def wants(self, record: dict[str, Any]) -> bool:
        if self.source is not None and record.get("source_id") != self.source:
            return False
        return self.kinds is None or record.get("event") in self.kinds

    def take(self) -> tuple[list[dict[str, Any]], int]:
        """What is waiting, and how many were dropped since the last take."""
        self.wake.clear()
        items = []
        while self.buffer:
            items.append(self.buffer.popleft())
        dropped, self.dropped = self.dropped, 0
        return items, dropped


class EventHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self.dropped_total = 0
        self.on_listening: Callable[[bool], None] | None = None
        """Told when the first subscriber comes and the last goes (shards forward frame
        records only while someone listens)."""

    def subscribe(self, subscriber: Subscriber) -> Subscriber:
        with self._lock:
            self._subscribers = [*self._subscribers, subscriber]
            first = len(self._subscribers) == 1
        if first and self.on_listening is not None:
            self.on_listening(True)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            before = len(self._subscribers)
            self._subscribers = [s for s in self._subscribers if s is not subscriber]
            last = before == 1 and not self._subscribers
        if last and self.on_listening is not None:
            self.on_listening(False)

    @property
    def listening(self) -> bool:
        return bool(self._subscribers)

    def publish(self, record: dict[str, Any]) -> None:
        for subscriber in self._subscribers:
            if not subscriber.wants(record):
                continue
            if len(subscriber.buffer) >= subscriber.size:
                subscriber.buffer.popleft()
                subscriber.dropped += 1
                self.dropped_total += 1
            subscriber.buffer.append(record)
            subscriber.wake.set()
