"""The stage lifecycle: open, process (an item or a batch), flush, close.

A stage never touches a queue or a thread: the runner owns both. ``process`` returns the
items to pass downstream (usually the same frame, with metadata added).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from vapipe.pipeline.assets import Kind
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.urls import mask_credentials


class StageConfig(BaseModel):
    """Base of every stage's config: unknown keys are errors, types are checked strictly."""

    model_config = ConfigDict(
        extra="forbid", strict=True, use_attribute_docstrings=True, frozen=True
    )

    def __repr__(self) -> str:
        return mask_credentials(super().__repr__())

    def __str__(self) -> str:
        return mask_credentials(super().__str__())

    # What the runtime and the application ask of a config (or of a table inside it), each
    # declared here with its default and overridden where a config has it: never read by key.

    def tables(self, prefix: str = "") -> Iterator[tuple[str, StageConfig]]:
        """(key prefix, table) of this config and of every table inside it
        (``("appearance.", AppearanceConfig)``, ``("backend.", TorchConfig)``)."""
        yield prefix, self
        for key, value in self:
            if isinstance(value, StageConfig):
                yield from value.tables(f"{prefix}{key}.")

    def models(self) -> dict[str, str]:
        """Key -> the model (manifest name or file) this table names: each is found or
        fetched, and checked, before any model loads."""
        return {}

    def native_stacks(self) -> frozenset[str]:
        """Native stacks this table loads that may not share a process with others
        (``migraphx``, ``vaapi``: pipeline/prepare.py)."""
        return frozenset()

    def preloads(self) -> tuple[str, ...]:
        """Modules a shard process imports ahead, in the process it is forked from (a
        backend's ``torch``), so that each shard does not import them again."""
        return ()


class ParallelConfig(StageConfig):
    """Config of a stage that may run several worker threads (order is kept by the runner)."""

    workers: int = Field(1, ge=1, le=64)
    """Worker threads for this stage; outputs keep their input order."""


@dataclass
class StageContext:
    """What a stage is told of the graph while it opens: facts the graph's builder worked
    out once (a stage never searches the graph itself)."""

    name: str
    sources_in_run: int = 1
    """Sources of the whole run, across every shard: they share this machine's cores."""
    source_ids: Sequence[str] = ()
    """The source ids whose frames this graph (this shard's, with shards) carries."""
    packet_consumers: Sequence[PacketConsumer] = ()
    """The stages after this one that take encoded packets (``takes_packets``): a source
    hands them its packets as it demuxes them."""
    pixels_read_after: bool = True
    """Whether a stage after this one reads the frames' pixels (``reads_pixels``): when none
    does, the preprocess node lets them go once the model input is made."""
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set when the run is asked to stop (Ctrl-C) while stages open: a stage with a long load
    (a gallery of thousands of pictures) looks at it and gives up, and the run ends."""


@runtime_checkable
class RecordSink(Protocol):
    """A stage that writes event records (``writes_records``). With shards, the shards send
    records and the parent process holds the one real sink, which it feeds through this."""

    def accept(self, record: dict[str, Any]) -> None:
        """An event record, as ``frame_records`` made it."""
        ...


@runtime_checkable
class PacketConsumer(Protocol):
    """A stage that takes its sources' encoded packets as they are demuxed
    (``takes_packets``), e.g. to keep a pre-roll to copy into clips."""

    def take_packet(self, source_id: str, packet: Any) -> None:
        """An encoded packet (``pipeline.frame.EncodedPacket``) of ``source_id``, called from
        the source's thread."""
        ...


@runtime_checkable
class Counting(Protocol):
    """A stage that counts what it did beyond frames (crops sent to a model, objects skipped):
    ``--stats`` and ``/metrics`` show each count."""

    def counters(self) -> dict[str, int]:
        """Counter name -> its count since the stage opened."""
        ...


@runtime_checkable
class SourceStatus(Protocol):
    """A source that tells the service how its stream is doing."""

    source_id: str
    """The source_id its frames carry."""
    display_uri: str
    """Where its frames come from, credentials masked."""
    reconnects: int
    """Times its stream was opened again after it was lost."""
    last_error: str | None
    """Why it is not open now (reconnecting), one line; None while it runs."""


@runtime_checkable
class LiveGeometry(Protocol):
    """A stage whose lines and zones the service reads and replaces while it runs."""

    def geometry(self, source_id: str) -> dict[str, Any]:
        """The lines and zones it applies to ``source_id``'s frames now."""
        ...

    def replace_geometry(self, source_id: str, lines: Any, zones: Any, where: str) -> None:
        """Applies these to ``source_id``'s frames from the next one on; raises ConfigError
        naming ``where`` for what is wrong."""
        ...


class Stage:
    """A node of the graph. Subclasses set ``Config`` and implement ``process``."""

    Config: ClassVar[type[StageConfig]] = StageConfig
    type_name: ClassVar[str] = ""
    writes_records: ClassVar[bool] = False
    """An event sink: it turns frames into records and ``accept``s them (a
    :class:`RecordSink`)."""
    parent_only: ClassVar[bool] = False
    """With shards, only the parent process holds it (a sink the Python API taps)."""
    binds: ClassVar[Literal["upstream", "downstream"] | None] = None
    """Where this node finds the object it is bound to: the nearest node in that direction
    that ``shares`` one (the preprocess node binds to its infer node's model, downstream; the
    nms node to it, upstream). Bound once, when the graph is built, before any node opens."""
    needs_upstream: ClassVar[tuple[str, ...]] = ()
    """Stage types one of which must come before this node on every path from a source
    (analytics needs track): checked when the graph is built."""

    @classmethod
    def upstream_needed(cls, config: Any) -> tuple[str, ...]:
        """``needs_upstream`` for this config (a node that can also run without one)."""
        return cls.needs_upstream

    redacts: ClassVar[bool] = False
    """It hides parts of the pictures (a ``redact`` node): once a graph has one, every node
    that ``writes_pictures`` must come after one on every path from a source."""
    takes_packets: bool = False
    """Whether sources upstream hand it their encoded video packets as demuxed (a
    :class:`PacketConsumer`)."""
    reads_pixels: bool = True
    """Whether ``process`` looks at ``frame.image``'s pixels, not only its shape. When no
    stage after preprocessing does, the preprocess node lets the pixels go once the model
    input is made (a 1080p frame is 6 MB, otherwise held until the last sink)."""

    def __init__(self, name: str, config: StageConfig) -> None:
        self.name = name
        self.config = config

    @property
    def workers(self) -> int:
        return self.config.workers if isinstance(self.config, ParallelConfig) else 1

    def open(self, context: StageContext) -> None:
        """Acquire resources. Called before any item, downstream stages first."""

    def process(self, item: Any) -> Iterable[Any]:
        """Handle one item; return what goes downstream."""
        return (item,)

    def handle_message(self, message: Any) -> Iterable[Any]:
        """An in-band message (a ``pipeline.frame.Message``); by default passed on. A stage
        that holds frames back returns them first, so order is kept."""
        return (message,)

    def flush(self) -> Iterable[Any]:
        """End of stream: return what is still held (a partial batch, say)."""
        return ()

    def close(self) -> None:
        """Release resources. Always called once ``open`` succeeded, on error and on Ctrl-C too."""

    def stats(self) -> dict[str, Any]:
        """Extra facts for the run's stats (the execution provider, say)."""
        return {}

    def shares(self) -> object | None:
        """What this node shares with the nodes bound to it (its model), or None."""
        return None

    def binds_to(self) -> str | None:
        """The node, by name, whose shared object this one is bound to instead of the nearest
        (an embed node's ``on``: the detect_inside node whose boxes it reads)."""
        return None

    @classmethod
    def reads_results_of(cls, config: Any) -> tuple[str, ...]:
        """Nodes whose results this node reads from the detections' attributes: each must come
        before it on every path from a source (checked when the graph is built)."""
        return ()

    def bind(self, shared: object | None) -> None:
        """The object of the node this one is bound to (see ``binds``), None where no node in
        that direction shares one. Called once, before ``open``."""

    @classmethod
    def assets_needed(cls, config: Any) -> list[tuple[Kind, str]]:
        """Manifest entries (``("models", "yolox-nano")``) this node needs: found or fetched
        for every node before any opens."""
        return []

    @classmethod
    def check_inputs(cls, config: Any) -> None:
        """Files the node reads that must be there before any node opens (a source's input
        file); raises ConfigError. Checked when a run starts, not when a graph is built."""

    @classmethod
    def check_for_sources(cls, config: Any, source_ids: Sequence[str]) -> None:
        """Checks that need the run's source ids (a topic or name made from them), done before
        anything opens; raises ConfigError."""

    @classmethod
    def files_written(cls, config: Any, source_ids: Sequence[str]) -> list[str | Names]:
        """Files this node would write for these sources, every name it gives them on the way
        (temporary names included), checked before anything opens: no output may be an input
        or another node's output."""
        return []

    @classmethod
    def writes_pictures(cls, config: Any) -> bool:
        """Whether pictures leave the process through it (a video, snapshots, clips, a live
        stream, a camera image): with a ``redacts`` node in the graph, it must come after one."""
        return False

    def behind_redaction(self) -> None:
        """Every path to it passes a ``redacts`` node: called once, before any node opens (the
        clips node then encodes the redacted frames instead of copying the source's packets)."""

    @classmethod
    def media_folder(cls, config: Any) -> str | None:
        """The folder of the files its events name (snapshots, clips): the service serves it
        under ``/media/``. None for a node that writes none."""
        return None

    @classmethod
    def history_file(cls, config: Any) -> str | None:
        """The event history it keeps (SQLite), which the service searches; None for others."""
        return None

    @classmethod
    def for_restart(cls, config: Any, restart: int) -> Any:
        """Its config in a shard started again for the ``restart``-th time: a node that writes
        files of its own per run writes the restart's own (not over the first run's)."""
        return config


class BatchStage(Stage):
    """A stage that takes batches: the runner gathers up to ``max_batch`` items or waits
    ``batch_timeout_s`` after the first, whichever comes first, and calls ``process_batch``."""

    max_batch: int = 1
    batch_timeout_s: float = 0.0

    def process_batch(self, items: list[Any]) -> Iterable[Any]:
        raise NotImplementedError

    def process(self, item: Any) -> Iterable[Any]:
        return self.process_batch([item])


class SourceStage(Stage):
    """A stage with no input: ``frames`` yields items until the stream ends."""

    @classmethod
    def is_live(cls, config: Any) -> bool:
        """Live sources default to leaky queues that drop the oldest frame."""
        return False

    @classmethod
    def source_id_of(cls, name: str, config: Any) -> str:
        """The source_id its frames will carry."""
        return name

    @classmethod
    def files_read(cls, config: Any) -> list[str | Names]:
        """Local files this source reads (none for cameras and URLs)."""
        return []

    @classmethod
    def uri_of(cls, config: Any) -> str:
        """Where its frames come from, as configured (credentials and all: callers mask it)."""
        return ""

    @classmethod
    def open_timeout_s(cls, config: Any) -> float | None:
        """How long opening it may take before it is given up (a service's added stream);
        None: no limit of its own."""
        return None

    @classmethod
    def decodes_on_gpu(cls, config: Any) -> bool:
        """Whether its pictures are decoded on a GPU's video decoders (then ``shards =
        "auto"`` counts fewer cores per shard)."""
        return False

    def total_frames(self) -> int | None:
        """Frames expected, when known (drives the progress bar)."""
        return None

    def frames(self) -> Iterator[Any]:
        raise NotImplementedError

    def stop(self) -> None:
        """Asked from another thread to stop soon (Ctrl-C); ``frames`` should return."""

    def resume_from(self, seq: int, pts: float | None, wall: float | None = None) -> None:
        """Restarted after a shard died: continue at frame ``seq`` (a file skips the frames
        before it; a camera numbers its next frame ``seq``, its pts after ``pts`` by the time
        passed since ``wall``, the time.time() when that frame was delivered)."""
