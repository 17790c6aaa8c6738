"""Threads, start/stop order, end-of-stream, error propagation and SIGINT/SIGTERM drain.

Shutdown is always a drain: sources stop, end-of-stream flows through every queue behind
the data already queued, each stage flushes and closes. A failed stage discards its
input (so nothing upstream blocks on it) while the stages downstream of it drain and
close normally; only after ``drain_timeout_s`` are the queues aborted.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Generator
from typing import Any, cast

from vapipe.pipeline import lingering
from vapipe.pipeline.affinity import pinned, runtime_cores
from vapipe.pipeline.config import NodeSpec
from vapipe.pipeline.errors import ConfigError, PipelineError, StageError
from vapipe.pipeline.frame import Message, in_order
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.launch import since_launch, startup_phases
from vapipe.pipeline.metrics import StageMetrics, frames_done, queue_summary
from vapipe.pipeline.node import Node, abort, undrained
from vapipe.pipeline.outcome import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    RunResult,
    as_pipeline_error,
    exit_code_for,
    naming_node,
)
from vapipe.pipeline.queues import EOS, Aborted, Inbox
from vapipe.pipeline.signals import install_stop_signals
from vapipe.pipeline.stage import BatchStage, SourceStage, Stage
from vapipe.pipeline.wiring import bind_all, context_for, downstream_of_each

log = logging.getLogger(__name__)

# For the aborted stages to end, all together: a shard's parent waits only a little longer.
ABORT_WAIT_S = 5.0


class Runner:
    """Runs one graph to the end. ``run`` returns an exit code; it never raises for stage errors."""

    shard = 0  # which shard this is (vapipe/shards/worker.py sets it), for python_cpus

    def __init__(
        self,
        graph: Graph,
        *,
        max_frames: int | None = None,
        make_stage: Callable[[str, NodeSpec], Stage] | None = None,
        sources_in_run: int | None = None,
    ) -> None:
        self.graph = graph
        self.max_frames = max_frames
        # A shard runs a subset of the sources; its decoders share the cores with the others'.
        self.sources_in_run = sources_in_run or len(graph.sources)
        runtime_cores(graph.spec.settings.python_cpus)  # checked now: a core it lacks exits 2
        self._cores: frozenset[int] | None = None  # pinned when the threads start (the shard's)
        # A shard swaps its event sinks for senders to the parent (vapipe/shards/worker.py).
        self._make_stage = make_stage or (lambda name, spec: spec.stage_cls(name, spec.config))
        self.stop_requested = threading.Event()
        self.interrupted = False
        self._error: PipelineError | None = None
        self._error_lock = threading.Lock()
        self._nodes: dict[str, Node] = {}
        self._nodes_lock = threading.Lock()
        self._started_at = 0.0
        self._wall_s = 0.0
        self.ready_at: float | None = None  # time.time() once every stage opened and started
        self._ready_s: float | None = None

    # -- public -------------------------------------------------------------------------

    def run(
        self, *, handle_signals: bool = True, on_started: Callable[[Runner], None] | None = None
    ) -> RunResult:
        self._started_at = time.monotonic()
        restore = install_stop_signals(self.on_signal) if handle_signals else None
        try:
            return self._run(on_started)
        finally:
            if restore:
                restore()

    def _run(self, on_started: Callable[[Runner], None] | None) -> RunResult:
        self._build()
        opened = self._open_all()
        if opened is not None:
            return self._result(opened)
        try:
            self._start_threads()
            self.ready_at = time.time()
            self._ready_s = since_launch()
            if on_started:
                on_started(self)
            self._wait()
        except BaseException:
            self.request_stop("internal error")
            raise
        return self._result(self._exit_code())

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop the sources; everything queued still drains through the graph."""
        if not self.stop_requested.is_set():
            log.info("stopping: %s", reason)
            self.stop_requested.set()
            for node in self.nodes().values():
                if isinstance(node.stage, SourceStage):
                    node.stage.stop()

    def stats(self) -> dict[str, Any]:
        stages = {name: node.stats() for name, node in self.nodes().items()}
        ends = [n for name, n in self.nodes().items() if not self.graph.successors(name)]
        queues = {  # a stream's link that ended (added to a service) still counts
            link.name: queue_summary(link, name)
            for name, node in self.nodes().items()
            for link in ([*node.inbox.retired, *node.inbox.links] if node.inbox else ())
        }
        wall = self._wall_s or (time.monotonic() - self._started_at)
        # Summed as each stage reports it (to the millisecond), so that the parts add up.
        opening = [round(n.open_s, 3) for n in self.nodes().values() if n.open_s is not None]
        return {
            "pipeline": self.graph.spec.settings.name or os.path.basename(self.graph.spec.file),
            "config": self.graph.spec.file,
            "wall_s": round(wall, 3),
            "open_s": round(sum(opening), 3),
            "startup": startup_phases(self._started_at, self._ready_s, ends),
            "stages": stages,
            "queues": queues,
            **({"python_cpus": sorted(self._cores)} if self._cores else {}),
        }

    def nodes(self) -> dict[str, Node]:
        """The running nodes now (a copy: a service adds and removes sources meanwhile)."""
        with self._nodes_lock:
            return dict(self._nodes)

    @property
    def stages(self) -> dict[str, Stage]:
        """The stage objects by node name, once ``run`` has built them."""
        return {name: node.stage for name, node in self.nodes().items()}

    def queue_depths(self) -> dict[str, int]:
        """Items waiting in each link queue now (for monitoring and benchmarks)."""
        nodes = self.nodes().values()
        return {link.name: len(link) for node in nodes if node.inbox for link in node.inbox.links}

    def progress(self) -> tuple[int, int | None]:
        """(frames out of the last stages, frames expected or None)."""
        nodes = self.nodes()
        sinks = [n for name, n in nodes.items() if not self.graph.successors(name)]
        sources = [n.stage for n in nodes.values() if isinstance(n.stage, SourceStage)]
        return frames_done(sinks, sources, self.max_frames)

    # -- set-up -------------------------------------------------------------------------

    def _build(self) -> None:
        for name in self.graph.order:
            spec = self.graph.nodes[name]
            stage = self._make_stage(name, spec)
            inbox = None if isinstance(stage, SourceStage) else Inbox(name)
            metrics = StageMetrics(name, spec.stage_cls.type_name)
            self._nodes[name] = Node(stage=stage, inbox=inbox, metrics=metrics)
        bind_all(self.graph, {name: node.stage for name, node in self._nodes.items()})
        for edge in self.graph.edges:
            # graph.build rejects links into sources, so every destination has an inbox.
            dst_inbox = cast(Inbox, self._nodes[edge.dst].inbox)
            link = dst_inbox.add_link(edge.name, edge.size, edge.leaky)
            self._nodes[edge.src].outputs.append(link)

    def _open_all(self) -> int | None:
        """Open downstream stages first: a source demuxes once its packets' takers are open."""
        opened: list[Node] = []
        source_ids = self.graph.source_ids
        downstream = downstream_of_each(self.graph, stages := self.stages)
        for name in reversed(self.graph.order):
            if self.stop_requested.is_set():  # Ctrl-C while stages opened: open no more
                break
            node = self._nodes[name]
            context = context_for(
                self.graph, stages, name, sources_in_run=self.sources_in_run,
                source_ids=source_ids, stopping=self.stop_requested, downstream=downstream,
            )  # fmt: skip
            try:
                opening = time.monotonic()
                node.stage.open(context)
                node.open_s = time.monotonic() - opening
                opened.append(node)
            except Exception as exc:
                for done in opened:
                    self._close(done)
                if isinstance(exc, ConfigError):
                    self._error = naming_node(exc, name)
                    return EXIT_USAGE
                self._record_error(name, exc, None, stop=False)
                return EXIT_FAILURE
        if not self.stop_requested.is_set():
            return None
        for done in opened:  # Ctrl-C while the stages opened: close them, start none
            self._close(done)
        return self._exit_code()

    def _start_threads(self) -> None:
        cores = self._cores = runtime_cores(self.graph.spec.settings.python_cpus, self.shard)
        for name in self.graph.order:
            node = self._nodes[name]
            count = 1 if isinstance(node.stage, SourceStage) else node.stage.workers
            node.workers = node.live_workers = count
            loop = self._source_loop if isinstance(node.stage, SourceStage) else self._stage_loop
            target = pinned(loop, cores)
            for index in range(count):
                thread = threading.Thread(
                    target=target,
                    args=(node,),
                    daemon=True,
                    name=f"{name}" + (f"-{index}" if count > 1 else ""),
                )
                node.threads.append(thread)
                lingering.watch(thread)
        for node in self.nodes().values():
            for thread in node.threads:
                thread.start()
        log.debug("started %d stage threads", sum(len(n.threads) for n in self.nodes().values()))

    # -- stage threads ------------------------------------------------------------------

    def _source_loop(self, node: Node) -> None:
        stage = cast(SourceStage, node.stage)
        count = 0
        item: Any = None
        try:
            frames = iter(stage.frames())
            while not self.stop_requested.is_set():
                started = time.perf_counter()
                item = next(frames, EOS)
                if item is EOS:
                    break
                node.push(item)
                if isinstance(item, Message):
                    continue
                node.last_seq = getattr(item, "seq", None)
                node.last_pts = getattr(item, "pts", None)
                node.metrics.record(1, time.perf_counter() - started)
                count += 1
                # By frame number, not frames seen here: a source resumed after a shard
                # restart still stops at the same frame.
                done = max(count, getattr(item, "seq", -1) + 1)
                if self.max_frames is not None and done >= self.max_frames:
                    log.info("%s: reached --max-frames %d", stage.name, self.max_frames)
                    break
            # A plug-in's source may give any iterator; a generator is told to clean up.
            if isinstance(frames, Generator):
                frames.close()
        except Aborted:
            pass
        except Exception as exc:
            self._source_failed(node, exc, item)
        finally:
            self._finish(node)

    def _source_failed(self, node: Node, exc: Exception, item: Any) -> None:
        """A source raised: the run stops with its error (a service keeps running)."""
        self._record_error(node.stage.name, exc, item)

    def _stage_loop(self, node: Node) -> None:
        stage, inbox = node.stage, cast(Inbox, node.inbox)
        current: Any = None  # the item (the first of a batch) being processed, for errors
        ticket = -1
        try:
            while True:
                with node.get_lock:
                    if isinstance(stage, BatchStage):
                        items, ended = inbox.get_batch(stage.max_batch, stage.batch_timeout_s)
                    else:
                        item = inbox.get()
                        items, ended = ([], True) if item is EOS else ([item], False)
                    ticket = node.next_ticket
                    node.next_ticket += 1
                outputs: list[Any] = []
                for run in in_order(items):
                    if isinstance(run, Message):
                        current = run
                        outputs.extend(stage.handle_message(run))
                        if node.on_message is not None:
                            node.on_message(run)
                        continue
                    current = run[0]
                    started = time.perf_counter()
                    if isinstance(stage, BatchStage):
                        outputs.extend(stage.process_batch(run))
                    else:
                        outputs.extend(stage.process(run[0]))
                    node.metrics.record(len(run), time.perf_counter() - started)
                    if not node.outputs:
                        node.metrics.record_latency(run)
                node.emit(ticket, outputs)
                if ended:
                    break
        except Aborted:
            pass
        except Exception as exc:
            self._record_error(stage.name, exc, current)
            inbox.discard()
            if node.workers > 1:
                node.emit(ticket, [])  # release the reorder slot of the failed item
        finally:
            self._finish(node)

    def _finish(self, node: Node) -> None:
        """The last worker of a stage flushes it, ends its output links and closes it."""
        with node.emit_lock:
            node.live_workers -= 1
            last = node.live_workers <= 0
        if not last:
            return
        try:
            if self._error is None or self._error_stage() != node.stage.name:
                started = time.perf_counter()
                tail = list(node.stage.flush())
                if tail:
                    node.metrics.record(0, time.perf_counter() - started)
                    node.push_all(tail)
        except Aborted:
            pass
        except Exception as exc:
            self._record_error(node.stage.name, exc, None)
        finally:
            for link in node.outputs:
                link.put_eos()
            self._close(node)
            node.finished.set()

    def _close(self, node: Node) -> None:
        try:
            node.stage.close()
        except Exception as exc:
            self._record_error(node.stage.name, exc, None)

    # -- errors and stopping --------------------------------------------------------------

    def _record_error(
        self, stage: str, exc: BaseException, item: Any, *, stop: bool = True
    ) -> None:
        error = as_pipeline_error(exc, stage, item)
        log.debug("stage %s failed", stage, exc_info=exc)
        with self._error_lock:
            if self._error is None:
                self._error = error
            else:
                log.debug("further error after the first: %s", error)
        if stop:
            self.request_stop(f"error in stage '{stage}'")

    def _error_stage(self) -> str | None:
        if isinstance(self._error, StageError):
            return self._error.stage
        return self._error.node if isinstance(self._error, ConfigError) else None

    def _wait(self) -> None:
        deadline: float | None = None
        drain_s = self.graph.spec.settings.drain_timeout_s
        while not all(node.finished.is_set() for node in self.nodes().values()):
            if self.stop_requested.is_set() and deadline is None:
                deadline = time.monotonic() + drain_s
            if deadline is not None and time.monotonic() > deadline:
                names = ", ".join(n.stage.name for n in undrained(self.nodes()))
                log.warning("stages did not drain within %.0f s (%s); aborting", drain_s, names)
                abort(self.nodes().values(), ABORT_WAIT_S)
                break
            time.sleep(0.05)
        self._wall_s = time.monotonic() - self._started_at

    def _exit_code(self) -> int:
        return exit_code_for(self._error, self.interrupted)

    def _result(self, code: int) -> RunResult:
        stats = self.stats()
        stats["exit_code"] = code
        stats["error"] = str(self._error) if self._error else None
        stats["started"] = any(node.threads for node in self.nodes().values())
        return RunResult(code, self._error, stats)

    def on_signal(self, signum: int, exit_on_repeat: bool = True) -> None:
        """SIGINT or SIGTERM: the first drains, a second exits at once (where asked)."""
        if self.interrupted and exit_on_repeat:
            os._exit(EXIT_INTERRUPTED)  # second Ctrl-C: leave now
        self.interrupted = True
        again = " (again to exit at once)" if exit_on_repeat else ""
        self.request_stop(f"{signal.Signals(signum).name}{again}")
