"""What the parent has delivered of each source in a sharded run: where a restarted shard
resumes (a file after its last delivered frame, a camera numbering on), which records of a
restarted shard were delivered before, and the ``source_down`` / ``source_up`` records."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from vapipe.pipeline.graph import Graph, source_id_of, source_type
from vapipe.pipeline.urls import mask_credentials

Resume = tuple[int, float | None, float | None]
"""Where a source goes on: (next seq, last pts, when that frame was captured: time.time())."""


@dataclass
class Delivered:
    """What has been delivered of one source, for resuming it and saying it came back."""

    node: str
    uri: str
    sinks: list[str]
    next_seq: dict[str, int] = field(default_factory=dict)  # per sink node
    last_pts: float | None = None
    last_captured: float | None = None  # time.time() of the last delivered frame's capture
    down_since: float | None = None
    down_attempt: int = 0


class Ledger:
    """Per source_id, what each event sink has had. Each source's records come from the
    thread that reads its shard; the lock is for readers on other threads (progress, the
    restart's resume points)."""

    def __init__(self, graph: Graph, sinks: Collection[str]) -> None:
        self._lock = threading.Lock()
        self._graph, self._sinks = graph, sinks
        self.sources: dict[str, Delivered] = {}
        for node_name in graph.sources:
            node = graph.nodes[node_name]
            uri = source_type(node).uri_of(node.config) or node_name
            self.track(source_id_of(node), node_name, uri, like=node_name)

    def track(self, source_id: str, node: str, uri: str, like: str) -> None:
        """A source from now on (a service's new stream: linked as node ``like`` is); one
        that had this id before starts afresh."""
        wanted = [name for name in self._graph.downstream_of(like) if name in self._sinks]
        with self._lock:
            self.sources[source_id] = Delivered(node, mask_credentials(uri), wanted)

    def forget(self, source_id: str) -> None:
        with self._lock:
            self.sources.pop(source_id, None)

    def progress(self) -> int:
        """Frames delivered, over all sources (by the furthest sink of each)."""
        with self._lock:
            return sum(max(s.next_seq.values(), default=0) for s in self.sources.values())

    def resume(self, nodes: Collection[str]) -> dict[str, Resume]:
        """Where each of these source nodes goes on when its shard starts again."""
        points: dict[str, Resume] = {}
        with self._lock:
            for source in self.sources.values():
                if source.node in nodes and source.next_seq:
                    points[source.node] = (
                        min(source.next_seq.values()),
                        source.last_pts,
                        source.last_captured,
                    )
        return points

    def admit(self, source_id: str, sink: str, seq: int) -> tuple[bool, dict[str, Any] | None]:
        """Whether frame ``seq`` is new to ``sink`` (a restarted shard sends again what was
        delivered before it died), and the ``source_up`` record when the source was down."""
        source = self.sources[source_id]
        with self._lock:
            if seq < source.next_seq.get(sink, 0):
                return False, None
            down_since, source.down_since = source.down_since, None
        if down_since is None:
            return True, None
        down_s = round(time.monotonic() - down_since, 3)
        up = self.record(source_id, "source_up", attempt=source.down_attempt, down_s=down_s)
        return True, up

    def delivered(self, source_id: str, sink: str, seq: int, pts: float, captured: float) -> None:
        """Frame ``seq`` reached ``sink``. Its capture time, not the time it got here, is where
        a camera's outage starts: the frames still in the pipeline when a shard dies were
        seen by the camera but are lost with it, and the restarted source's time must span
        them (measured from delivery, output time fell short by the pipeline's latency)."""
        source = self.sources[source_id]
        with self._lock:
            source.next_seq[sink] = seq + 1
            if source.last_pts is None or pts >= source.last_pts:
                source.last_pts, source.last_captured = pts, captured

    def went_down(
        self, nodes: Collection[str], attempt: int, reason: str
    ) -> list[tuple[Delivered, dict[str, Any]]]:
        """The ``source_down`` record of each source of these nodes (their shard died)."""
        down = []
        with self._lock:
            sources = list(self.sources.items())
        for source_id, source in sources:
            if source.node not in nodes:
                continue
            with self._lock:
                source.down_attempt = attempt
                if source.down_since is None:
                    source.down_since = time.monotonic()
            record = self.record(source_id, "source_down", reason=reason, attempt=attempt)
            down.append((source, record))
        return down

    def record(self, source_id: str, kind: str, **data: Any) -> dict[str, Any]:
        """A record about the source, placed after its last delivered frame."""
        from vapipe.stages.events.records import iso_time

        source = self.sources[source_id]
        seq = min(source.next_seq.values(), default=0) - 1
        return {
            "event": kind,
            "source_id": source_id,
            "seq": seq if seq >= 0 else None,
            "pts": source.last_pts,
            "time": iso_time(time.time()),
            "uri": source.uri,
            **data,
        }
