"""``[pipeline] shards = N``: the sources split across N processes, past the GIL.

Each shard (vapipe/shards/worker.py) runs the whole graph on its share of the sources, with its
own detector. This process holds the one real sink of each event node: the shards send
records, and each shard's records arrive in the order it made them, so events stay in order
per source. A shard that dies is reported (``source_down`` for its sources), started again
with them (a file resumes after the last frame delivered, a camera numbers on), and its
sources come back with ``source_up``; after ``shard_restarts`` the run fails. The first
Ctrl-C or SIGTERM is passed on to every shard, which drains as a single process would.

The supervisor is composed, not subclassed: a transport starts and stops the shards (local
processes, vapipe/shards/local.py, or Ray actors, vapipe/shards/ray_actors.py) and a mode
says what they run (a run, or a service's streams: vapipe/serve/sharded.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from vapipe.pipeline.errors import ConfigError, PipelineError, StageError
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.outcome import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    RunResult,
    exit_code_for,
    naming_node,
)
from vapipe.pipeline.stage import RecordSink, Stage, StageContext
from vapipe.shards.ledger import Delivered, Ledger
from vapipe.shards.local import JOIN_S, LocalProcesses
from vapipe.shards.plan import partition
from vapipe.shards.roles import Done, Mode, RunMode, Slot, Transport
from vapipe.shards.stats import merge_stats
from vapipe.shards.worker import ShardJob, record_taps_of

log = logging.getLogger(__name__)

_STACKS_S = 0.5  # for a hung shard to write its stacks before it is killed


class ShardRunner:
    """Runs a graph as shards; ``run`` returns like :class:`Runner.run`. ``transport``
    (default: local processes) starts them; ``mode`` (default: a run) says what they run."""

    def __init__(
        self,
        graph: Graph,
        count: int,
        *,
        transport: Transport | None = None,
        mode: Mode | None = None,
        overrides: tuple[str, ...] = (),
        max_frames: int | None = None,
        log_level: str = "info",
        log_format: str = "text",
    ) -> None:
        self.graph = graph
        self.transport: Transport = transport or LocalProcesses()
        self.mode: Mode = mode or RunMode()
        self.settings = graph.spec.settings
        self.overrides, self.max_frames = overrides, max_frames
        self.log_level, self.log_format = log_level, log_format
        self.record_taps = record_taps_of(graph)
        self.stop_requested = threading.Event()
        self.interrupted = False
        self._error: PipelineError | None = None
        self._lock = threading.Lock()
        self._sinks: dict[str, Stage] = {}
        self._sink_locks: dict[str, threading.Lock] = {}
        devices = self.settings.devices
        self._slots = [
            Slot(index, group, devices[index % len(devices)] if devices else None)
            for index, group in enumerate(partition(graph.sources, count))
        ]
        self.ledger = Ledger(graph, ())
        self._started_at = time.monotonic()
        self._wall_s = 0.0

    # -- public -------------------------------------------------------------------------

    def run(
        self,
        *,
        handle_signals: bool = False,
        on_started: Callable[[ShardRunner], None] | None = None,
    ) -> RunResult:
        """Like :meth:`Runner.run`; signals are the caller's to route to :meth:`on_signal`."""
        self._started_at = time.monotonic()
        try:
            self.transport.open(self.graph)
        except ConfigError as exc:
            self._error = exc
            return self._result(EXIT_USAGE, started=False)
        try:
            return self._run(on_started)
        finally:
            self.transport.close()

    @property
    def slots(self) -> list[Slot]:
        return self._slots

    def _run(self, on_started: Callable[[ShardRunner], None] | None) -> RunResult:
        failed = self._open_sinks()
        if failed is not None:
            return self._result(failed, started=False)
        self._map_sources()
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=self._supervise, args=(slot,), name=f"shard{slot.index}"
            )
            slot.thread.start()
        if on_started:
            on_started(self)
        self._wait()
        for name, sink in self._sinks.items():
            try:
                sink.close()
            except Exception as exc:
                self._fail(StageError(name, str(exc) or type(exc).__name__))
        self._wall_s = time.monotonic() - self._started_at
        return self._result(self._exit_code(), started=True)

    def on_signal(self, signum: int) -> None:
        """The first SIGINT/SIGTERM drains every shard; a second kills them and exits."""
        if self.interrupted:
            for slot in self._slots:
                self.transport.kill(slot)
            os._exit(EXIT_INTERRUPTED)
        self.interrupted = True
        self.request_stop(f"{signal.Signals(signum).name} (again to exit at once)")

    def request_stop(self, reason: str) -> None:
        if self.stop_requested.is_set():
            return
        log.info("stopping: %s", reason)
        self.stop_requested.set()
        for slot in self._slots:
            self.transport.stop(slot)

    def progress(self) -> tuple[int, int | None]:
        return self.ledger.progress(), None

    # -- set-up -------------------------------------------------------------------------

    def _open_sinks(self) -> int | None:
        for name, node in self.graph.nodes.items():
            if not node.stage_cls.writes_records:
                continue
            sink = node.stage_cls(name, node.config)
            try:
                if not isinstance(sink, RecordSink):
                    raise TypeError(f"{node.stage_cls.__name__} writes records, has no accept()")
                sink.open(StageContext(name=name))
            except Exception as exc:
                for opened in self._sinks.values():
                    opened.close()
                if isinstance(exc, ConfigError):
                    self._error = naming_node(exc, name)
                    return EXIT_USAGE
                self._error = StageError(name, str(exc) or type(exc).__name__)
                return EXIT_FAILURE
            self._sinks[name] = sink
            self._sink_locks[name] = threading.Lock()
        return None

    def _map_sources(self) -> None:
        self.ledger = Ledger(self.graph, self._sinks)

    # -- one shard, from start to its end, restarts included ------------------------------

    def _supervise(self, slot: Slot) -> None:
        while True:
            ended = self.transport.run_once(slot, self._job(slot), self.mode, self)
            if slot.done is not None:
                code, error, _ = slot.done
                if error is not None:
                    self._fail(ConfigError(error) if code == EXIT_USAGE else PipelineError(error))
                return
            what = "did not drain after the stop and was killed" if slot.hung else "died"
            reason = f"shard {slot.index} ({', '.join(self.names_of(slot))}) {what} ({ended})"
            self._sources_down(slot, reason)
            if self.stop_requested.is_set() or slot.restarts >= self.settings.shard_restarts:
                self._fail(PipelineError(f"{reason}; restarted {slot.restarts} times, no more"))
                return
            slot.restarts += 1
            log.warning(
                "%s; starting it again (%d of %d)",
                reason,
                slot.restarts,
                self.settings.shard_restarts,
            )

    def names_of(self, slot: Slot) -> tuple[str, ...]:
        """The source nodes the shard runs (a service's include the streams added to it)."""
        return self.mode.names_of(slot)

    def _job(self, slot: Slot) -> ShardJob:
        resume = self.ledger.resume(self.names_of(slot)) if slot.restarts else {}
        job = ShardJob(
            index=slot.index,
            config=self.graph.spec.file,
            config_text=self.graph.spec.text,
            overrides=self.overrides,
            sources=slot.sources,
            max_frames=self.max_frames,
            device=slot.device,
            resume=resume,
            restart=slot.restarts,
            sources_in_run=len(self.graph.sources),
            spawned_at=time.time(),
            log_level=self.log_level,
            log_format=self.log_format,
            record_taps=self.record_taps,
        )
        return self.mode.job(slot, job)

    def handle(self, slot: Slot, message: tuple[Any, ...]) -> Done | None:
        """One message from a shard; the shard's end when it is the last."""
        kind = message[0]
        if kind == "frame":
            _, sink, source_id, seq, pts, captured, records = message
            self._deliver_frame(sink, source_id, seq, (pts, captured), records)
        elif kind == "message":
            _, sink, records = message
            self._write(sink, records)
        elif kind == "done":
            return message[1], message[2], message[3]
        else:
            self.mode.other(slot, message)
        return None

    def _deliver_frame(
        self,
        sink: str,
        source_id: str,
        seq: int,
        at: tuple[float, float],
        records: list[dict[str, Any]],
    ) -> None:
        """Frame ``seq`` of a source, at (pts, capture time), with its records."""
        source = self.ledger.sources.get(source_id)
        if source is None:  # a source_id this process does not know: written as it is
            self._write(sink, records)
            return
        new, up = self.ledger.admit(source_id, sink, seq)
        if not new:
            return  # delivered before the shard was restarted
        if up is not None:
            self._write_all(source, up)
        self._write(sink, records)
        self.ledger.delivered(source_id, sink, seq, *at)

    def _sources_down(self, slot: Slot, reason: str) -> None:
        for source, record in self.ledger.went_down(self.names_of(slot), slot.restarts + 1, reason):
            self._write_all(source, record)

    def _write_all(self, source: Delivered, record: dict[str, Any]) -> None:
        for sink in source.sinks:
            self._write(sink, [record])
        self.mode.delivered(record)

    def _write(self, sink: str, records: list[dict[str, Any]]) -> None:
        target = self._sinks.get(sink)
        if target is None:
            return
        try:
            with self._sink_locks[sink]:
                for record in records:
                    cast(RecordSink, target).accept(record)  # checked when it opened
        except Exception as exc:
            self._fail(StageError(sink, str(exc) or type(exc).__name__))

    # -- ending -------------------------------------------------------------------------

    def _wait(self) -> None:
        deadline: float | None = None
        # The shards drain themselves within drain_timeout_s; this is the last resort.
        grace = self.settings.drain_timeout_s + JOIN_S
        while any(slot.thread and slot.thread.is_alive() for slot in self._slots):
            if self.stop_requested.is_set() and deadline is None:
                deadline = time.monotonic() + grace
            if deadline is not None and time.monotonic() > deadline:
                hung = [s for s in self._slots if s.thread and s.thread.is_alive()]
                log.warning(
                    "shards did not drain within %.0f s (%s); their stacks follow, then they "
                    "are killed",
                    grace,
                    ", ".join(f"shard {slot.index}" for slot in hung),
                )
                for slot in hung:
                    slot.hung = True
                    self.transport.ask_stacks(slot)
                time.sleep(_STACKS_S)  # the shards write them on their own; a moment for it
                for slot in self._slots:
                    self.transport.kill(slot)
                deadline = float("inf")
            for slot in self._slots:
                if slot.thread is not None:
                    slot.thread.join(0.05)

    def _fail(self, error: PipelineError) -> None:
        with self._lock:
            first = self._error is None
            if first:
                self._error = error
        if first:
            self.request_stop(str(error))

    def _exit_code(self) -> int:
        return exit_code_for(self._error, self.interrupted)

    def _result(self, code: int, *, started: bool) -> RunResult:
        shards = [
            {
                "index": slot.index,
                "sources": list(slot.sources),
                "device": slot.device,
                "restarts": slot.restarts,
                "exit_code": slot.done[0] if slot.done else None,
                **({"node": slot.node} if slot.node else {}),
            }
            for slot in self._slots
        ]
        children = [slot.done[2] if slot.done else {} for slot in self._slots]
        wall = self._wall_s or (time.monotonic() - self._started_at)
        stats = merge_stats(self.graph, shards, children, self._sinks, wall, started)
        stats.update(self.transport.describe())
        stats["exit_code"] = code
        stats["error"] = str(self._error) if self._error else None
        return RunResult(code, self._error, stats)
