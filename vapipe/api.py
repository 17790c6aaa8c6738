"""The Python API: a pipeline built from TOML (a file or a string), run to its end, or its
events iterated as they happen (docs/python.md).

It runs exactly what ``run-pipeline CONFIG`` runs: the same config rules and errors, the same
runner (shards and a Ray cluster included), the same stats as ``--stats``, the same events as
the events sink. It adds no threads of its own to the graph's but one that runs it while
:meth:`Pipeline.events` hands the events to the caller.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import signal
import threading
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from os import PathLike
from types import FrameType
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from vapipe.pipeline import config as config_module
from vapipe.pipeline import graph as graph_module
from vapipe.pipeline.config import ConfigSpec, NodeSpec
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.outcome import EXIT_INTERRUPTED, EXIT_USAGE, RunResult
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.pipeline.urls import mask_credentials

if TYPE_CHECKING:
    from vapipe.pipeline.runner import Runner
    from vapipe.shards.supervisor import ShardRunner

__all__ = ["Event", "Outcome", "Pipeline"]

EVENTS_NODE = "python-events"
"""The node :meth:`Pipeline.events` links into the graph (a name no config can use)."""
EVENT_BUFFER = 256
"""Events held for a caller that reads slower than the pipeline: past this the pipeline
waits, as it does for any slow sink; nothing is dropped."""


class Event(TypedDict):
    """One event, as the events sink writes it (docs/events.md): every event has ``event``,
    ``source_id``, ``seq``, ``pts`` and ``time``; the rest depends on its type."""

    event: str
    source_id: str
    seq: int | None
    pts: float | None
    time: str
    id: NotRequired[str]
    detections: NotRequired[list[dict[str, Any]]]
    analytics: NotRequired[dict[str, Any]]
    track_id: NotRequired[int]
    class_id: NotRequired[int]
    class_name: NotRequired[str]
    line: NotRequired[str]
    direction: NotRequired[str]
    counts: NotRequired[dict[str, Any]]
    zone: NotRequired[str]
    dwell_s: NotRequired[float]
    reason: NotRequired[str]
    occupancy: NotRequired[int]
    max_objects: NotRequired[int]
    track_ids: NotRequired[list[int]]
    uri: NotRequired[str]
    attempt: NotRequired[int]
    down_s: NotRequired[float]


@dataclass(frozen=True)
class Outcome:
    """How a run ended: as ``run-pipeline``'s exit code, its error in one line (credentials
    masked; None when it succeeded), and the stats ``--stats`` writes."""

    exit_code: int
    error: str | None
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def interrupted(self) -> bool:
        """Stopped by :meth:`Pipeline.stop` (or Ctrl-C) after draining: outputs are whole."""
        return self.exit_code == EXIT_INTERRUPTED

    def raise_for_error(self) -> None:
        """Raise :class:`PipelineError` with the one-line error, if the run failed."""
        if self.error is not None:
            raise PipelineError(self.error)


def toml_value(value: Any) -> str:
    """A Python value as the TOML an override's VALUE is read as."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                               for k, v in value.items()) + "}"  # fmt: skip
    raise ConfigError(f"an override's value must be TOML-like, not {type(value).__name__}")


def _overrides(given: Mapping[str, Any] | None) -> tuple[str, ...]:
    return tuple(f"{key}={toml_value(value)}" for key, value in (given or {}).items())


class _EventsTap(Stage):
    """Hands the caller of :meth:`Pipeline.events` what an events sink linked here would
    write. It writes records: in shards, each shard sends its records to this one, which
    only the parent runs."""

    type_name = "python-events"
    reads_pixels = False
    writes_records = True
    parent_only = True
    handoff: _Handoff
    empty_frames: bool

    def process(self, frame: Frame) -> tuple[Frame]:
        from vapipe.stages.events.records import frame_records

        for record in frame_records(frame, empty_frames=self.empty_frames):
            self.handoff.put(record)
        return (frame,)

    def accept(self, record: dict[str, Any]) -> None:
        if record["event"] == "frame" and not (self.empty_frames or record["detections"]):
            return
        self.handoff.put(record)

    def handle_message(self, message: Message) -> tuple[Message]:
        from vapipe.stages.events.records import message_record

        self.handoff.put(message_record(message))
        return (message,)


def _tap_class(handoff: _Handoff, empty_frames: bool) -> type[_EventsTap]:
    """The tap's class for one run: stages are made from their class, name and config."""
    return type("EventsTap", (_EventsTap,), {"handoff": handoff, "empty_frames": empty_frames})


class _Handoff:
    """Events from the pipeline's threads to the caller's: bounded, and given up on once the
    caller has stopped reading (so that a drain never waits on it)."""

    END = object()

    def __init__(self) -> None:
        self.items: queue.Queue[Any] = queue.Queue(EVENT_BUFFER)
        self.abandoned = threading.Event()

    def put(self, record: dict[str, Any]) -> None:
        from vapipe.stages.events.records import to_json

        event = json.loads(to_json(record))  # the very JSON the events sink writes
        while not self.abandoned.is_set():
            try:
                self.items.put(event, timeout=0.1)
                return
            except queue.Full:
                continue

    def end(self) -> None:
        self.items.put(self.END)  # the reader takes items until this one: never full for long


class Pipeline:
    """A pipeline graph, validated, ready to run. Build one with :meth:`from_toml` or
    :meth:`from_string`; run it with :meth:`run` or :meth:`events`; :meth:`stop` it from any
    thread. One run at a time; it may be run again after."""

    def __init__(
        self, spec: ConfigSpec, overrides: tuple[str, ...] = (), max_frames: int | None = None
    ) -> None:
        if max_frames is not None and max_frames < 1:
            raise ConfigError("max_frames must be at least 1")
        graph_module.build(spec)  # every link and file rule checked now, not at the run
        self.spec = spec
        self.overrides = overrides
        self.max_frames = max_frames
        self.outcome: Outcome | None = None
        """How the last run ended (None before the first)."""
        self._lock = threading.Lock()
        self._runner: Runner | ShardRunner | None = None
        self._running = False
        self._stop = threading.Event()

    @classmethod
    def from_toml(
        cls,
        path: str | PathLike[str],
        overrides: Mapping[str, Any] | None = None,
        *,
        max_frames: int | None = None,
    ) -> Pipeline:
        """The config file at ``path``, with ``overrides`` as ``--set`` would apply them
        (``{"det.max_batch": 8}``). A bad file, key or value raises :class:`ConfigError`,
        one line naming the file, node and key."""
        given = _overrides(overrides)
        return cls(config_module.load(path, given), given, max_frames)

    @classmethod
    def from_string(
        cls,
        text: str,
        overrides: Mapping[str, Any] | None = None,
        *,
        max_frames: int | None = None,
        name: str = "<string>",
    ) -> Pipeline:
        """A config given as TOML text (``name`` is what errors call it); relative paths in it
        are relative to the working directory."""
        given = _overrides(overrides)
        return cls(config_module.parse(text, name, given), given, max_frames)

    @property
    def nodes(self) -> list[str]:
        """The graph's nodes, sources first, in the order items flow."""
        return list(graph_module.build(self.spec).order)

    def run(self) -> Outcome:
        """Run to the end of every source (or ``max_frames``, or :meth:`stop`) and return how
        it ended. Failures of the run are in the outcome, never raised; from the main thread,
        a Ctrl-C drains the run as :meth:`stop` does (a second one raises
        ``KeyboardInterrupt``)."""
        runner = self._start(self.spec)
        if runner is None:
            assert self.outcome is not None
            return self.outcome
        try:
            with _ctrl_c_stops(self):
                return self._finish(runner.run(handle_signals=False))
        finally:
            self._end()

    def events(self, *, empty_frames: bool = True) -> Iterator[Event]:
        """Every event the run produces, as it happens, ending when the run ends: the same
        JSON objects, in the same order, as an events sink in the graph writes (``frame``
        events without detections left out when ``empty_frames`` is off). Leaving the loop
        early stops the run and waits for it to drain. A run that fails raises
        :class:`PipelineError` (one line, naming the stage) after its last event; the outcome
        is in :attr:`outcome` either way."""
        handoff = _Handoff()
        spec = self._with_events_tap(handoff, empty_frames)
        runner = self._start(spec)
        if runner is None:
            assert self.outcome is not None
            self.outcome.raise_for_error()
            return
        thread = threading.Thread(
            target=self._run_in_thread, args=(runner, handoff), name="vapipe-run", daemon=True
        )
        thread.start()
        try:
            while (item := handoff.items.get()) is not _Handoff.END:
                yield item
        finally:
            handoff.abandoned.set()
            if thread.is_alive():  # the caller left early: the run drains
                self.stop()
            thread.join()
            self._end()
        assert self.outcome is not None
        self.outcome.raise_for_error()

    def stop(self) -> None:
        """Stop the sources; what is queued drains through every stage and the sinks flush
        and close, as on Ctrl-C. Safe from any thread, and before the run has started."""
        with self._lock:
            self._stop.set()
            runner = self._runner
        if runner is not None:
            runner.interrupted = True
            runner.request_stop("stop() called")

    # -- the run -------------------------------------------------------------------------

    def _with_events_tap(self, handoff: _Handoff, empty_frames: bool) -> ConfigSpec:
        """The graph with the events node behind what the first events sink reads (it sees
        what that sink sees), or in a graph without one, behind its last node (which has
        seen what every stage before it added)."""
        graph = graph_module.build(self.spec)
        upstream = next(
            (name for name in graph.order for s in graph.successors(name)
             if graph.nodes[s].stage_cls.writes_records),
            graph.order[-1],
        )  # fmt: skip
        node = NodeSpec(EVENTS_NODE, _tap_class(handoff, empty_frames), StageConfig(), None)
        return replace(
            self.spec,
            nodes={**self.spec.nodes, EVENTS_NODE: node},
            links=[*self.spec.links, f"{upstream} ! {EVENTS_NODE}"],
        )

    def _start(self, spec: ConfigSpec) -> Runner | ShardRunner | None:
        """The run's runner, or None (and :attr:`outcome` set) when it cannot start."""
        from vapipe.pipeline.prepare import prepare_assets
        from vapipe.shards.choice import runner_for

        with self._lock:
            if self._running:
                raise RuntimeError("this pipeline is already running; one run at a time")
            self._running = True
            self._stop.clear()
        try:
            graph = graph_module.build(spec)
            prepare_assets(graph)
            runner = runner_for(
                spec,
                graph,
                overrides=self.overrides,
                max_frames=self.max_frames,
                log_level=_shard_log_level(),
            )
        except ConfigError as exc:
            self.outcome = Outcome(EXIT_USAGE, mask_credentials(str(exc)), {})
            self._end()
            return None
        with self._lock:
            self._runner = runner
            stop = self._stop.is_set()
        if stop:  # stop() came before the runner: it opens, and drains at once
            self.stop()
        return runner

    def _run_in_thread(self, runner: Runner | ShardRunner, handoff: _Handoff) -> None:
        try:
            self._finish(runner.run(handle_signals=False))
        finally:
            handoff.end()

    def _finish(self, result: RunResult) -> Outcome:
        error = mask_credentials(str(result.error)) if result.error is not None else None
        self.outcome = Outcome(result.exit_code, error, result.stats)
        return self.outcome

    def _end(self) -> None:
        with self._lock:
            self._runner = None
            self._running = False


def _shard_log_level() -> str:
    """Shards log at the level the caller's ``vapipe`` logger has."""
    level = logging.getLogger("vapipe").getEffectiveLevel()
    for name in ("debug", "info", "warning"):
        if level <= logging.getLevelName(name.upper()):
            return name
    return "error"


def _restorable(handler: Any) -> Any:
    """A SIGINT handler that ``signal.signal`` can put back: one set outside Python (None to
    ``getsignal``) becomes Python's own."""
    return signal.default_int_handler if handler is None else handler


@contextmanager
def _ctrl_c_stops(pipeline: Pipeline) -> Generator[None, None, None]:
    """In the main thread, a first Ctrl-C stops the run and lets it drain; a second raises
    ``KeyboardInterrupt`` as usual. Elsewhere signals are not this thread's to take."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = _restorable(signal.getsignal(signal.SIGINT))

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, previous)  # the next one is Python's own
        pipeline.stop()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
