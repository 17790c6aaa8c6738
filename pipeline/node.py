"""One stage while a graph runs: its inbox, output links, metrics and worker bookkeeping,
and the hand-over of its outputs in input order."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vapipe.pipeline import lingering
from vapipe.pipeline.frame import Message
from vapipe.pipeline.metrics import StageMetrics
from vapipe.pipeline.queues import Inbox, LinkQueue
from vapipe.pipeline.stage import Stage

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Node:
    """Runtime state of one stage: its inbox, output links, metrics and worker bookkeeping."""

    stage: Stage
    inbox: Inbox | None
    metrics: StageMetrics
    outputs: list[LinkQueue] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    workers: int = 1
    live_workers: int = 0
    open_s: float | None = None
    next_ticket: int = 0
    next_emit: int = 0
    pending: dict[int, list[Any]] = field(default_factory=dict)
    get_lock: threading.Lock = field(default_factory=threading.Lock)
    emit_lock: threading.Lock = field(default_factory=threading.Lock)
    finished: threading.Event = field(default_factory=threading.Event)
    removing: bool = False
    error: str | None = None
    """Why a source that runs on its own (a service's stream) ended, if it failed."""
    last_seq: int | None = None
    last_pts: float | None = None
    on_message: Callable[[Message], None] | None = None
    """Told of each in-band message this stage has handled (a service waits on these)."""

    def emit(self, ticket: int, outputs: list[Any]) -> None:
        """Pass outputs on in input order (by ``ticket``), whichever worker finished first."""
        if self.workers == 1:
            self.push_all(outputs)
            return
        with self.emit_lock:
            self.pending[ticket] = outputs
            while self.next_emit in self.pending:
                self.push_all(self.pending.pop(self.next_emit))
                self.next_emit += 1

    def push_all(self, outputs: Iterable[Any]) -> None:
        """Every output onto every link, each link taking them in one hand-over."""
        items = outputs if isinstance(outputs, list) else list(outputs)
        if items:
            for link in self.outputs:
                link.put_many(items)

    def push(self, item: Any) -> None:
        for link in self.outputs:
            link.put(item)

    def stats(self) -> dict[str, Any]:
        """Its metrics, open time and the stage's own stats."""
        entry = self.metrics.summary()
        if self.open_s is not None:
            entry["open_s"] = round(self.open_s, 3)
        try:
            entry.update(self.stage.stats())
        except Exception as exc:  # stats must never mask the run's real outcome
            log.debug("stats of %s failed: %s", self.metrics.name, exc)
        return entry


def undrained(nodes: dict[str, Node]) -> list[Node]:
    return [node for node in nodes.values() if not node.finished.is_set()]


def abort(nodes: Iterable[Node], wait_s: float) -> None:
    """Past the drain timeout: say where each stage that has not ended is (its threads'
    stacks, in the log), abort every queue, and give them ``wait_s`` in all to end."""
    nodes = list(nodes)
    stuck = [node for node in nodes if not node.finished.is_set()]
    lingering.log_stacks([thread for node in stuck for thread in node.threads])
    for node in nodes:
        if node.inbox:
            node.inbox.abort()
    deadline = time.monotonic() + wait_s
    for node in stuck:
        node.finished.wait(max(0.0, deadline - time.monotonic()))
