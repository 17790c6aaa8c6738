"""One shard: the graph run on a subset of the sources in a process of its own.

A shard gets a :class:`ShardJob` (plain data: the config file, the overrides and its source
names) and a connection; it sends back what its event sinks would have written, as records,
and at the end its stats. Nothing else crosses, so a shard could as well run on another
machine. The parent (vapipe/shards/supervisor.py) holds the real event sinks and the restarts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import logging
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vapipe.pipeline.config import ConfigSpec, NodeSpec
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.stage import SourceStage, Stage, StageConfig

log = logging.getLogger(__name__)

Send = Callable[[tuple[Any, ...]], None]
EARLY_STOP = threading.Event()


@dataclass(frozen=True)
class ShardJob:
    index: int
    config: str
    """The config file's name (for messages): its text is ``config_text``."""
    config_text: str
    """The config as the run read it when it started: a shard started again later runs the
    same graph, whatever has become of the file since (edited, deleted, a pipe)."""
    overrides: tuple[str, ...]
    sources: tuple[str, ...]
    max_frames: int | None = None
    device: str | None = None
    resume: dict[str, tuple[int, float | None, float | None]] = field(default_factory=dict)
    """Source node -> (next seq, last pts delivered, time.time() it was delivered), after a
    restart."""
    restart: int = 0
    spawned_at: float | None = None
    """time.time() when the parent started this shard's process: start-up is measured from it."""
    sources_in_run: int | None = None
    """Sources across all shards (decoder threads are shared out among them)."""
    log_level: str = "info"
    log_format: str = "text"
    service: Any = None
    """Run as a service's shard, streams coming and going, by this class (the service's
    :class:`~vapipe.serve.shard_side.ShardService`, passed by reference: the shards'
    room runs it without importing the service's room). It has ``graph_spec(spec, sources,
    restart)``; made as ``(graph, job, send, make_stage)``, it holds ``runner`` and
    ``serve(control, runner)``."""
    added: tuple[dict[str, Any], ...] = ()
    """Streams the service had added to this shard before it was restarted (request bodies)."""
    edits: tuple[tuple[str, Any], ...] = ()
    """The line/zone edits the service had made to this shard's streams (id, PUT body)."""
    record_taps: tuple[tuple[str, str], ...] = ()
    """(node, the node it reads): nodes the parent's graph has and the config does not (the
    Python API's events), to which the shard sends records as to an event sink's."""
    cwd: str | None = None
    """The parent's working directory: a shard on another machine works there when that
    machine has it (the config's relative paths then mean the same), else where it started."""
    env: dict[str, str] = field(default_factory=dict)
    """The parent's values of the variables the config names (``${VAR}``): a shard on another
    machine expands the config as the parent did."""


def subset(spec: ConfigSpec, sources: tuple[str, ...], restart: int = 0) -> ConfigSpec:
    """The config with only these sources: the others, their links and queue settings go.
    A restarted shard writes its files under new names (``.restart1``), so the video written
    before the restart is kept."""
    dropped = {
        name
        for name, node in spec.nodes.items()
        if issubclass(node.stage_cls, SourceStage) and name not in sources
    }
    links = []
    for chain in spec.links:
        names = [part.strip() for part in chain.split("!")]
        while names and names[0] in dropped:  # sources only ever head a chain
            names.pop(0)
        if len(names) > 1:
            links.append(" ! ".join(names))
    queues = {
        link: settings
        for link, settings in spec.queues.items()
        if link.split(" ! ")[0].strip() not in dropped
    }
    nodes = {}
    for name, node in spec.nodes.items():
        if name in dropped:
            continue
        if restart:
            config = node.stage_cls.for_restart(node.config, restart)
            if config is not node.config:
                node = NodeSpec(node.name, node.stage_cls, config, node.line)
        nodes[name] = node
    return ConfigSpec(
        spec.file, spec.settings, nodes, links, spec.links_line, queues, spec.text, spec.serve
    )


class RecordTap(Stage):
    """A node only the parent runs (:attr:`ShardJob.record_taps`): in a shard's graph it
    holds its place, and a :class:`RecordSender` runs there instead."""

    writes_records = True
    parent_only = True


def record_taps_of(graph: Graph) -> tuple[tuple[str, str], ...]:
    """(node, the node it reads) of each node of ``graph`` that only the parent runs."""
    return tuple(
        (name, next(up for up in graph.order if name in graph.successors(up)))
        for name, node in graph.nodes.items()
        if node.stage_cls.parent_only
    )


def with_record_taps(spec: ConfigSpec, taps: tuple[tuple[str, str], ...]) -> ConfigSpec:
    """The shard's graph with each tap linked behind the node it reads, where this shard
    has that node."""
    taps = tuple((name, upstream) for name, upstream in taps if upstream in spec.nodes)
    if not taps:
        return spec
    nodes = {name: NodeSpec(name, RecordTap, StageConfig(), None) for name, _ in taps}
    links = [f"{upstream} ! {name}" for name, upstream in taps]
    return dataclasses.replace(spec, nodes={**spec.nodes, **nodes}, links=[*spec.links, *links])


class RecordSender(Stage):
    """Stands in for an event sink inside a shard: the records go to the parent, whose sink
    filters and writes them exactly as it would have."""

    reads_pixels = False

    def __init__(self, name: str, config: StageConfig, send: Send) -> None:
        # Here, not at the top: the framework does not import stages until a run needs them.
        from vapipe.stages.events.records import frame_records, message_record

        super().__init__(name, config)
        self._send = send
        self._frame_records, self._message_record = frame_records, message_record

    def process(self, frame: Frame) -> tuple[Frame]:
        records = list(self._frame_records(frame))
        self._send(
            ("frame", self.name, frame.source_id, frame.seq, frame.pts, frame.capture_time, records)
        )
        return (frame,)

    def handle_message(self, message: Message) -> tuple[Message]:
        self._send(("message", self.name, [self._message_record(message)]))
        return (message,)


def run_shard(job: ShardJob, conn: Any, control: Any = None) -> None:
    """The shard process's entry point (multiprocessing, spawn)."""
    # The parent decides when to stop and tells each shard with SIGTERM: a terminal's Ctrl-C
    # reaches every process of the group, and a second signal here would mean "exit at once".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: EARLY_STOP.set())  # before the runner exists
    # Every thread's stack on SIGUSR1, written by C code that needs no GIL: what the parent
    # asks of a shard that did not drain before it kills it (a process hung whole, in a
    # native call holding the GIL, still answers).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    _stop_when_orphaned()
    if job.device is not None:
        for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
            os.environ[variable] = job.device
    lock = threading.Lock()
    parent_gone = threading.Event()

    def send(message: tuple[Any, ...]) -> None:
        if parent_gone.is_set():
            return
        with lock:
            try:
                conn.send(message)
            except OSError:  # the parent died (SIGTERM is on its way): drain all the same
                parent_gone.set()
                log.warning("the parent process is gone: events are no longer delivered")

    try:
        code, error, stats = run_job(job, send, control)
    except BaseException as exc:  # never a traceback wall from a shard: the parent says it
        code, error, stats = 1, f"shard {job.index}: {type(exc).__name__}: {exc}", {}
    send(("done", code, error, stats))
    with contextlib.suppress(OSError):
        conn.close()


def run_job(
    job: ShardJob,
    send: Send,
    control: Any,
    on_runner: Callable[[Any], None] | None = None,
) -> tuple[int, str | None, dict[str, Any]]:
    """The shard's run. In a process of its own (``on_runner`` None) SIGTERM drains it; else
    (a cluster's actor, on a thread that cannot take signals) ``on_runner`` is given the
    runner, whose ``on_signal`` then drains it."""
    from vapipe.pipeline import config as config_module
    from vapipe.pipeline import graph as graph_module
    from vapipe.pipeline.errors import ConfigError
    from vapipe.pipeline.logs import setup_logging
    from vapipe.pipeline.outcome import EXIT_USAGE
    from vapipe.pipeline.runner import Runner
    from vapipe.pipeline.signals import install_stop_signals

    setup_logging(job.log_level, job.log_format, prefix=f"shard{job.index} ")
    try:
        spec = config_module.parse(job.config_text, job.config, job.overrides)
        if job.service is not None:
            spec = job.service.graph_spec(spec, job.sources, job.restart)
        else:
            spec = subset(spec, job.sources, job.restart)
        spec = with_record_taps(spec, job.record_taps)
        graph = graph_module.build(spec)
    except ConfigError as exc:
        return EXIT_USAGE, str(exc), {}

    def make_stage(name: str, node: NodeSpec) -> Stage:
        if node.stage_cls.writes_records:
            return RecordSender(name, node.config, send)
        stage = node.stage_cls(name, node.config)
        if name in job.resume and isinstance(stage, SourceStage):
            stage.resume_from(*job.resume[name])
        return stage

    runner: Runner
    if job.service is not None:
        shard_service = job.service(graph, job, send, make_stage)
        runner = shard_service.runner
        on_started: Callable[[Runner], None] | None = partial(shard_service.serve, control)
    else:
        runner = Runner(
            graph,
            max_frames=job.max_frames,
            make_stage=make_stage,
            sources_in_run=job.sources_in_run,
        )
        on_started = None
    runner.shard = job.index
    if on_runner is not None:
        on_runner(runner)
    else:
        # Every SIGTERM here drains: the parent sends one (it kills a shard outright with
        # SIGKILL), and its death sends one per thread it had (PR_SET_PDEATHSIG follows the
        # creating thread).
        install_stop_signals(lambda signum: runner.on_signal(signum, exit_on_repeat=False))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if EARLY_STOP.is_set():
            runner.on_signal(signal.SIGTERM)
    result = runner.run(handle_signals=False, on_started=on_started)
    stats = result.stats
    stats["process"] = process_stats()
    if job.spawned_at is not None and runner.ready_at is not None:
        stats["process"]["ready_s"] = round(runner.ready_at - job.spawned_at, 3)
    return result.exit_code, str(result.error) if result.error else None, stats


def _stop_when_orphaned() -> None:
    """SIGTERM (a drain) when the parent process dies, even by SIGKILL: a shard must not run
    on alone, looping over its cameras with nobody to take the events (Linux; elsewhere the
    broken pipe stops it at its next event)."""
    # Forked from a forkserver, the process whose death PDEATHSIG sees is the server, which
    # outlives the parent while shards hold its "alive" pipe: so also watch the parent's
    # sentinel, a pipe whose other end only the parent holds.
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        sentinel = parent.sentinel

        def watch() -> None:
            multiprocessing.connection.wait([sentinel])
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def process_stats() -> dict[str, Any]:
    """Peak host memory, and GPU memory where torch is loaded and on a GPU."""
    facts: dict[str, Any] = {
        "pid": os.getpid(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # The GPUs this shard was given, as it saw them (pipeline.devices).
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        facts["gpu_peak_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    return facts
