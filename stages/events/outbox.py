"""What lets a network event sink (a broker, a web server) never hold up the video path: a
bounded :class:`Outbox` whose ``put`` never blocks (when full, the oldest record is dropped and
counted), emptied by a thread of the sink's own, and :class:`Reachability`, which says once
when the peer stops taking what is sent and once when it takes it again."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

log = logging.getLogger(__name__)

UNREACHABLE_WARN_S = 5.0
"""A peer that has taken nothing for this long is warned about while it lasts."""


class Reachability:
    """Whether a sink's peer takes what is sent: one warning once it has not for
    ``warn_after_s``, one info line when it does again."""

    def __init__(self, sink: str, peer: str, warn_after_s: float = UNREACHABLE_WARN_S) -> None:
        self.sink, self.peer, self.warn_after_s = sink, peer, warn_after_s
        self.down_since: float | None = None
        self.warned = False
        self.outages = 0
        """Times the peer was unreachable for longer than ``warn_after_s``."""

    def failing(self, reason: str, waiting: int, since: float | None = None) -> None:
        """Nothing taken now (since ``since``, monotonic, if known)."""
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now if since is None else since
        if not self.warned and now - self.down_since >= self.warn_after_s:
            self.warned = True
            self.outages += 1
            log.warning(
                "%s: %s unreachable for %.0f s (%s); %d events waiting",
                self.sink, self.peer, now - self.down_since, reason, waiting,
            )  # fmt: skip

    def reachable(self) -> None:
        if self.warned and self.down_since is not None:
            log.info(
                "%s: %s reachable again after %.1f s",
                self.sink, self.peer, time.monotonic() - self.down_since,
            )  # fmt: skip
        self.down_since, self.warned = None, False


class Outbox:
    def __init__(self, size: int) -> None:
        self._items: deque[Any] = deque()
        self.size = size
        self.dropped = 0
        self.high_water = 0
        self._ready = threading.Condition()
        self.closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> None:
        with self._ready:
            if len(self._items) >= self.size:
                self._items.popleft()  # the oldest goes: what is queued stays the freshest
                self.dropped += 1
            self._items.append(item)
            self.high_water = max(self.high_water, len(self._items))
            self._ready.notify()

    def take(self, most: int, wait_s: float, fill_s: float = 0.0) -> list[Any]:
        """Up to ``most`` items: waits ``wait_s`` for the first, then ``fill_s`` for more."""
        with self._ready:
            if not self._items and not self.closed:
                self._ready.wait(wait_s)
            deadline = time.monotonic() + fill_s
            while len(self._items) < most and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._ready.wait(remaining)
            return [self._items.popleft() for _ in range(min(most, len(self._items)))]

    def give_back(self, items: list[Any]) -> None:
        """Items taken but not delivered go back to the front, in order (if there is room)."""
        with self._ready:
            room = max(self.size - len(self._items), 0)
            kept = items[len(items) - room :] if room < len(items) else items
            self.dropped += len(items) - len(kept)
            self._items.extendleft(reversed(kept))
            self._ready.notify()

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()

    def wait_empty(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self._items and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._items
