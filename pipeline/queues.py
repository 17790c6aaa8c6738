"""Bounded queues between stages, with GStreamer's leaky policies.

Every consumer owns one :class:`Inbox`; each link into it is a :class:`LinkQueue`. All
link queues of an inbox share one lock, so a consumer with several inputs (fan-in) can
wait on all of them at once. End-of-stream is an item that travels behind the data of
its link; the inbox reports end-of-stream once every link into it has delivered one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Leaky(StrEnum):
    """What a full queue does with a new item (GStreamer's `leaky` property)."""

    NO = "no"
    """Block the producer until there is room: nothing is lost."""
    UPSTREAM = "upstream"
    """Drop the new item (the upstream end of the queue)."""
    DOWNSTREAM = "downstream"
    """Drop the oldest queued item, so what is queued stays fresh."""


class _EndOfStream:
    _instance: _EndOfStream | None = None

    def __new__(cls) -> _EndOfStream:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EOS"


EOS: Any = _EndOfStream()
"""The end-of-stream item. Never dropped by a leaky queue."""


class Aborted(Exception):
    """The run is being torn down: a blocked put or get gives up."""


@dataclass
class QueueStats:
    """Counters one link queue keeps for the final summary."""

    size: int
    leaky: str
    high_water: int = 0
    dropped: int = 0
    dropped_by_source: Counter[str] | None = None


class LinkQueue:
    """One bounded link from a producer into an inbox."""

    def __init__(
        self, inbox: Inbox, name: str, size: int, leaky: Leaky, transient: bool = False
    ) -> None:
        if size < 1:
            raise ValueError(f"queue {name}: size must be >= 1, got {size}")
        self.name = name
        self.size = size
        self.leaky = Leaky(leaky)
        self._inbox = inbox
        self._items: deque[Any] = deque()
        self._not_full = threading.Condition(inbox.lock)
        self.ended = False
        self.transient = transient
        """Added while the graph runs (a stream added to a service): dropped once it ends."""
        self.stats = QueueStats(size=size, leaky=self.leaky.value, dropped_by_source=Counter())

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> bool:
        """Queue ``item``; returns False when it was dropped (leaky or discarding)."""
        return self.put_many((item,)) == 1

    def put_many(self, items: Sequence[Any]) -> int:
        """Queue ``items`` in order, each as the link's policy says (a full blocking link
        waits for room, a leaky one drops), under one hold of the lock and with one wake-up
        for all of them (a batch's frames: one hand-over, not one per frame). Returns how many
        were queued."""
        inbox = self._inbox
        queued = unannounced = 0
        with inbox.lock:
            for item in items:
                if inbox.aborted:
                    raise Aborted(self.name)
                if inbox.discarding:
                    break
                if len(self._items) >= self.size:
                    if self.leaky is Leaky.UPSTREAM:
                        self._count_drop(item)
                        continue
                    if self.leaky is Leaky.DOWNSTREAM:
                        self._drop_oldest_data()
                    else:
                        inbox.not_empty.notify(unannounced)  # what is queued can be taken now
                        unannounced = 0
                        while len(self._items) >= self.size:
                            self._not_full.wait()  # every pop, discard and abort notifies
                            if inbox.aborted:
                                raise Aborted(self.name)
                            if inbox.discarding:
                                return queued
                self._items.append(item)
                queued += 1
                unannounced += 1
                self.stats.high_water = max(self.stats.high_water, len(self._items))
            inbox.not_empty.notify(unannounced)  # a consumer woken for each item, as one by one
        return queued

    def put_eos(self) -> None:
        """End this link. Control items skip the size bound, so they can never block."""
        with self._inbox.lock:
            self._items.append(EOS)
            self._inbox.not_empty.notify_all()  # every waiting worker may have to end

    def _drop_oldest_data(self) -> None:
        for index, queued in enumerate(self._items):
            if queued is not EOS:
                del self._items[index]
                self._count_drop(queued)
                return

    def _count_drop(self, item: Any) -> None:
        self.stats.dropped += 1
        source_id = getattr(item, "source_id", None)
        if source_id is not None and self.stats.dropped_by_source is not None:
            self.stats.dropped_by_source[source_id] += 1

    def _pop(self) -> Any:
        item = self._items.popleft()
        self._not_full.notify()
        return item


class Inbox:
    """The input side of one consumer: one or more link queues, read as one stream."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.lock = threading.Lock()
        self.not_empty = threading.Condition(self.lock)
        self.links: list[LinkQueue] = []
        self.aborted = False
        self.discarding = False
        self.held = False
        self._retiring = False  # a transient link has ended: drop it at the next look
        self.retired: list[LinkQueue] = []
        """Transient links dropped once ended: their counts stay in the run's summary."""
        self._next = 0

    def add_link(
        self, name: str, size: int, leaky: Leaky | str = Leaky.NO, transient: bool = False
    ) -> LinkQueue:
        with self.lock:
            link = LinkQueue(self, name, size, Leaky(leaky), transient)
            self.links.append(link)
            return link

    def hold(self) -> None:
        """Not ended while held, even with every link ended: a service's streams come and go,
        and the stages behind them wait for the next one."""
        with self.lock:
            self.held = True

    def release(self) -> None:
        with self.lock:
            self.held = False
            self.not_empty.notify_all()

    def get(self) -> Any:
        """The next item from any link (round-robin), or EOS once every link has ended."""
        with self.lock:
            while True:
                if self.aborted:  # a hard stop leaves what is queued where it is
                    raise Aborted(self.owner)
                item = self._pop_any()
                if item is not None:
                    return item
                # No polling: every append, release and abort notifies. A timeout here would
                # wake every idle stage thread several times a second (thousands of them
                # in a large graph, each taking the interpreter lock).
                self.not_empty.wait()

    def get_batch(self, max_items: int, timeout_s: float) -> tuple[list[Any], bool]:
        """Up to ``max_items`` items, waiting at most ``timeout_s`` after the first one.

        Returns ``(items, ended)``; ``ended`` is True when every link has ended, in which
        case ``items`` holds whatever came before (possibly a partial batch, or nothing).
        """
        first = self.get()
        if first is EOS:
            return [], True
        items = [first]
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while len(items) < max_items:
                if self.aborted:
                    raise Aborted(self.owner)
                item = self._pop_any()
                if item is EOS:
                    return items, True
                if item is not None:
                    items.append(item)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.not_empty.wait(min(remaining, 0.25))
        return items, False

    def _pop_any(self) -> Any:
        """Caller holds the lock. None when nothing is ready and not every link ended."""
        count = len(self.links)
        for offset in range(count):
            link = self.links[(self._next + offset) % count]
            while link._items:
                item = link._pop()
                if item is EOS:
                    link.ended = True
                    self._retiring = self._retiring or link.transient
                    continue
                self._next = (self._next + offset + 1) % count
                return item
        if self._retiring:
            self.retired += [link for link in self.links if link.transient and link.ended]
            self.links = [link for link in self.links if not (link.transient and link.ended)]
            self._retiring, self._next = False, 0
        if all(link.ended for link in self.links) and not self.held:
            return EOS
        return None

    def discard(self) -> None:
        """The consumer has stopped: drop what is queued and whatever comes, unblock producers."""
        with self.lock:
            self.discarding = True
            for link in self.links:
                link._items.clear()
                link._not_full.notify_all()

    def abort(self) -> None:
        """Hard stop: every blocked put or get raises :class:`Aborted`."""
        with self.lock:
            self.aborted = True
            self.not_empty.notify_all()
            for link in self.links:
                link._not_full.notify_all()
