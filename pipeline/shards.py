"""``[pipeline] shards = N``: the sources split across N processes, past the GIL.

Each shard (pipeline/shard.py) runs the whole graph on its share of the sources, with its
own detector. This process holds the one real sink of each event node: the shards send
records, and each shard's records arrive in the order it made them, so events stay in order
per source. A shard that dies is reported (``source_down`` for its sources), started again
with them (a file resumes after the last frame delivered, a camera numbers on), and its
sources come back with ``source_up``; after ``shard_restarts`` the run fails. The first
Ctrl-C or SIGTERM is passed on to every shard, which drains as a single process would.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vapipe.pipeline.errors import ConfigError, PipelineError, StageError
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.runner import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    RunResult,
    exit_code_for,
    naming_node,
)
from vapipe.pipeline.shard import ShardJob, run_shard
from vapipe.pipeline.stage import Stage, StageContext
from vapipe.pipeline.urls import mask_credentials

log = logging.getLogger(__name__)

CORES_PER_SHARD = 2  # measured: 16 x 1080p on 16 cores, 8 shards beat 4 by 1.4x
_JOIN_S = 10.0  # a shard that said "done" but does not exit is killed after this


def shard_count(setting: int | str, sources: int, cpus: int | None = None) -> int:
    """Shards to start: the setting, ``"auto"`` as one per 2 cores, never more than sources."""
    if setting == "auto":
        wanted = max(1, (cpus or os.cpu_count() or 1) // CORES_PER_SHARD)
    else:
        wanted = int(setting)
    return max(1, min(wanted, sources))


def partition(sources: list[str], count: int) -> list[tuple[str, ...]]:
    """Round robin, in config order: shard 0 gets sources 0, N, 2N, ..."""
    return [tuple(sources[index::count]) for index in range(count)]


@dataclass
class _Source:
    """What has been delivered of one source, for resuming it and saying it came back."""

    node: str
    uri: str
    sinks: list[str]
    next_seq: dict[str, int] = field(default_factory=dict)  # per sink node
    last_pts: float | None = None
    last_delivered: float | None = None  # time.time()
    down_since: float | None = None
    down_attempt: int = 0


@dataclass
class _Slot:
    index: int
    sources: tuple[str, ...]
    device: str | None
    restarts: int = 0
    process: Any = None
    done: tuple[int, str | None, dict[str, Any]] | None = None
    thread: threading.Thread | None = None


class ShardRunner:
    """Runs a graph as shards; ``run`` returns like :class:`Runner.run`."""

    def __init__(
        self,
        graph: Graph,
        count: int,
        *,
        overrides: tuple[str, ...] = (),
        max_frames: int | None = None,
        log_level: str = "info",
        log_format: str = "text",
    ) -> None:
        self.graph = graph
        self.settings = graph.spec.settings
        self.overrides = overrides
        self.max_frames = max_frames
        self.log_level, self.log_format = log_level, log_format
        self.stop_requested = threading.Event()
        self.interrupted = False
        self._error: PipelineError | None = None
        self._lock = threading.Lock()
        self._sinks: dict[str, Stage] = {}
        self._sink_locks: dict[str, threading.Lock] = {}
        devices = self.settings.devices
        self._slots = [
            _Slot(index, group, devices[index % len(devices)] if devices else None)
            for index, group in enumerate(partition(graph.sources, count))
        ]
        self._sources: dict[str, _Source] = {}
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
        failed = self._open_sinks()
        if failed is not None:
            return self._result(failed, started=False)
        self._map_sources()
        context = multiprocessing.get_context("spawn")
        for slot in self._slots:
            slot.thread = threading.Thread(
                target=self._supervise, args=(slot, context), name=f"shard{slot.index}"
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
                _kill(slot.process)
            os._exit(EXIT_INTERRUPTED)
        self.interrupted = True
        self.request_stop(f"{signal.Signals(signum).name} (again to exit at once)")

    def request_stop(self, reason: str) -> None:
        if self.stop_requested.is_set():
            return
        log.info("stopping: %s", reason)
        self.stop_requested.set()
        for slot in self._slots:
            _terminate(slot.process)

    def progress(self) -> tuple[int, int | None]:
        with self._lock:
            done = sum(max(s.next_seq.values(), default=0) for s in self._sources.values())
        return done, None

    # -- set-up -------------------------------------------------------------------------

    def _open_sinks(self) -> int | None:
        for name, node in self.graph.nodes.items():
            if not node.stage_cls.writes_records:
                continue
            sink = node.stage_cls(name, node.config)
            try:
                sink.open(StageContext(name=name, downstream=[]))
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
        for node_name in self.graph.sources:
            node = self.graph.nodes[node_name]
            source_id = node.stage_cls.source_id_of(node_name, node.config)
            sinks = [n for n in self.graph.downstream_of(node_name) if n in self._sinks]
            uri = mask_credentials(str(getattr(node.config, "uri", node_name)))
            self._sources[source_id] = _Source(node_name, uri, sinks)

    # -- one shard, from start to its end, restarts included ------------------------------

    def _supervise(self, slot: _Slot, context: Any) -> None:
        while True:
            reader, writer = context.Pipe(duplex=False)
            job = self._job(slot)
            slot.process = context.Process(
                target=run_shard, args=(job, writer), name=f"vapipe-shard{slot.index}"
            )
            slot.process.start()
            writer.close()
            log.info(
                "shard%d (pid %d%s): %s",
                slot.index,
                slot.process.pid,
                f", device {slot.device}" if slot.device else "",
                ", ".join(slot.sources),
            )
            if self.stop_requested.is_set():
                _terminate(slot.process)
            slot.done = self._read(slot, reader)
            reader.close()
            slot.process.join(_JOIN_S if slot.done else None)
            if slot.process.is_alive():
                _kill(slot.process)
                slot.process.join()
            if slot.done is not None:
                code, error, _ = slot.done
                if error is not None:
                    self._fail(ConfigError(error) if code == EXIT_USAGE else PipelineError(error))
                return
            reason = (
                f"shard {slot.index} ({', '.join(slot.sources)}) died "
                f"({_exit_text(slot.process.exitcode)})"
            )
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

    def _job(self, slot: _Slot) -> ShardJob:
        resume: dict[str, tuple[int, float | None, float | None]] = {}
        if slot.restarts:
            with self._lock:
                for source in self._sources.values():
                    if source.node in slot.sources and source.next_seq:
                        resume[source.node] = (
                            min(source.next_seq.values()),
                            source.last_pts,
                            source.last_delivered,
                        )
        return ShardJob(
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
        )

    def _read(self, slot: _Slot, reader: Any) -> tuple[int, str | None, dict[str, Any]] | None:
        """Deliver the shard's records until it says it is done (or its pipe breaks: None)."""
        while True:
            try:
                message = reader.recv()
            except Exception:  # EOF, or half a message from a process that was killed
                return None
            kind = message[0]
            if kind == "frame":
                _, sink, source_id, seq, pts, records = message
                self._deliver_frame(sink, source_id, seq, pts, records)
            elif kind == "message":
                _, sink, records = message
                self._write(sink, records)
            elif kind == "done":
                return message[1], message[2], message[3]

    def _deliver_frame(
        self, sink: str, source_id: str, seq: int, pts: float, records: list[dict[str, Any]]
    ) -> None:
        source = self._sources.get(source_id)
        if source is None:  # a source_id this process does not know: written as it is
            self._write(sink, records)
            return
        with self._lock:
            if seq < source.next_seq.get(sink, 0):
                return  # delivered before the shard was restarted
            came_back = source.down_since is not None
            if came_back:
                down_s = round(time.monotonic() - source.down_since, 3)  # type: ignore[operator]
                source.down_since = None
        if came_back:
            self._write_all(
                source,
                self._message(source_id, source, "source_up", attempt=source.down_attempt,
                              down_s=down_s),
            )  # fmt: skip
        self._write(sink, records)
        with self._lock:
            source.next_seq[sink] = seq + 1
            source.last_pts = pts if source.last_pts is None else max(source.last_pts, pts)
            source.last_delivered = time.time()

    def _sources_down(self, slot: _Slot, reason: str) -> None:
        for source_id, source in self._sources.items():
            if source.node not in slot.sources:
                continue
            with self._lock:
                source.down_attempt = slot.restarts + 1
                if source.down_since is None:
                    source.down_since = time.monotonic()
            self._write_all(
                source,
                self._message(source_id, source, "source_down", reason=reason,
                              attempt=source.down_attempt),
            )  # fmt: skip

    def _message(self, source_id: str, source: _Source, kind: str, **data: Any) -> dict[str, Any]:
        from vapipe.stages.sinks.records import iso_time

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

    def _write_all(self, source: _Source, record: dict[str, Any]) -> None:
        for sink in source.sinks:
            self._write(sink, [record])

    def _write(self, sink: str, records: list[dict[str, Any]]) -> None:
        target = self._sinks.get(sink)
        if target is None:
            return
        try:
            with self._sink_locks[sink]:
                for record in records:
                    target.accept(record)
        except Exception as exc:
            self._fail(StageError(sink, str(exc) or type(exc).__name__))

    # -- ending -------------------------------------------------------------------------

    def _wait(self) -> None:
        deadline: float | None = None
        # The shards drain themselves within drain_timeout_s; this is the last resort.
        grace = self.settings.drain_timeout_s + _JOIN_S
        while any(slot.thread and slot.thread.is_alive() for slot in self._slots):
            if self.stop_requested.is_set() and deadline is None:
                deadline = time.monotonic() + grace
            if deadline is not None and time.monotonic() > deadline:
                log.warning("shards did not drain within %.0f s; killing them", grace)
                for slot in self._slots:
                    _kill(slot.process)
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
        stats = merge_stats(self, started)
        stats["exit_code"] = code
        stats["error"] = str(self._error) if self._error else None
        return RunResult(code, self._error, stats)


def merge_stats(runner: ShardRunner, started: bool) -> dict[str, Any]:
    """Every shard's stats, and per stage the sum over shards: frames and fps add up (the
    shards run side by side), mean time is weighted by frames, p95 is the worst shard's."""
    shards = []
    stages: dict[str, dict[str, Any]] = {}
    queues: dict[str, Any] = {}
    for slot in runner._slots:
        child = slot.done[2] if slot.done else {}
        shards.append(
            {
                "index": slot.index,
                "sources": list(slot.sources),
                "device": slot.device,
                "restarts": slot.restarts,
                "exit_code": slot.done[0] if slot.done else None,
                "wall_s": child.get("wall_s"),
                "process": child.get("process", {}),
                "stages": child.get("stages", {}),
            }
        )
        for name, entry in child.get("stages", {}).items():
            _add_stage(stages.setdefault(name, {}), entry)
        for name, queue in child.get("queues", {}).items():
            _add_queue(queues.setdefault(name, {}), queue)
    for name, sink in runner._sinks.items():
        stages.setdefault(name, {"type": sink.type_name, "frames": 0, "calls": 0, "fps": None,
                                 "mean_ms": None, "p95_ms": None})  # fmt: skip
        stages[name].update(sink.stats())
    order = {name: index for index, name in enumerate(runner.graph.order)}
    stages = dict(sorted(stages.items(), key=lambda item: order.get(item[0], len(order))))
    wall = runner._wall_s or (time.monotonic() - runner._started_at)
    spec = runner.graph.spec
    return {
        "pipeline": spec.settings.name or os.path.basename(spec.file),
        "config": spec.file,
        "wall_s": round(wall, 3),
        "ready_s": max((s["process"].get("ready_s", 0.0) for s in shards), default=None),
        "stages": stages,
        "queues": queues,
        "shards": shards,
        "started": started,
    }


def _add_stage(total: dict[str, Any], entry: dict[str, Any]) -> None:
    if not total:
        total.update(entry)
        total["latency"] = dict(entry.get("latency", {}))
        if not total["latency"]:
            del total["latency"]
        return
    frames_before, frames = total.get("frames") or 0, entry.get("frames") or 0
    total["frames"] = frames_before + frames
    total["calls"] = (total.get("calls") or 0) + (entry.get("calls") or 0)
    fps = [v for v in (total.get("fps"), entry.get("fps")) if v is not None]
    total["fps"] = round(sum(fps), 2) if fps else None
    if total.get("mean_ms") is not None and entry.get("mean_ms") is not None and total["frames"]:
        total["mean_ms"] = round(
            (total["mean_ms"] * frames_before + entry["mean_ms"] * frames) / total["frames"], 3
        )
    else:
        total["mean_ms"] = total.get("mean_ms") or entry.get("mean_ms")
    p95 = [v for v in (total.get("p95_ms"), entry.get("p95_ms")) if v is not None]
    total["p95_ms"] = max(p95) if p95 else None
    opening = [v for v in (total.get("open_s"), entry.get("open_s")) if v is not None]
    if opening:  # shards open side by side: the slowest is what the run waited for
        total["open_s"] = max(opening)
    if entry.get("latency"):
        total.setdefault("latency", {}).update(entry["latency"])


def _add_queue(total: dict[str, Any], queue: dict[str, Any]) -> None:
    """A link as every shard has it: drops add up, the high-water mark is the highest."""
    if not total:
        total.update(queue, dropped_by_source=dict(queue.get("dropped_by_source", {})))
        return
    total["high_water"] = max(total["high_water"], queue["high_water"])
    total["dropped"] += queue["dropped"]
    for source, count in queue.get("dropped_by_source", {}).items():
        total["dropped_by_source"][source] = total["dropped_by_source"].get(source, 0) + count


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _terminate(process: Any) -> None:
    if process is not None and process.is_alive():
        with contextlib.suppress(OSError, ValueError):  # it ended meanwhile
            process.terminate()  # SIGTERM: the shard drains


def _kill(process: Any) -> None:
    if process is not None and process.is_alive():
        with contextlib.suppress(OSError, ValueError):
            process.kill()
