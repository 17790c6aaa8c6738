"""What a shard supervisor is composed of: a slot per shard, a *transport* (how a shard is
started, stopped and heard from: a local process, a Ray actor) and a *mode* (what the shards
run: a run that ends with its sources, or a service whose streams come and go). The supervisor
(vapipe/shards/supervisor.py) holds one of each; a new transport or mode is an object, not a
subclass of the supervisor."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from vapipe.shards.worker import ShardJob

Done = tuple[int, str | None, dict[str, Any]]
"""How a shard ended, as it said: exit code, error, stats."""


@dataclass
class Slot:
    """One shard, across its restarts."""

    index: int
    sources: tuple[str, ...]
    device: str | None
    restarts: int = 0
    process: Any = None
    """The transport's handle of the running shard (a process, an actor)."""
    done: Done | None = None
    thread: threading.Thread | None = None
    added: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Streams a service added to this shard while it runs: id -> the request's body."""
    node: str | None = None
    """Where it runs, when that is not this machine (a cluster's node)."""
    hung: bool = False
    """Killed by this process for not draining after the stop."""


class Listener(Protocol):
    """What a transport tells the supervisor while a shard runs."""

    stop_requested: threading.Event

    def handle(self, slot: Slot, message: tuple[Any, ...]) -> Done | None:
        """One message from the shard; how it ended, when it is the last."""
        ...

    def names_of(self, slot: Slot) -> tuple[str, ...]:
        """The source nodes the shard runs (for the log)."""
        ...


class Mode(Protocol):
    """What the shards run, and what the supervisor does with what they say beyond records."""

    wants_control: bool
    """Whether each shard gets a control channel (a service's shards do)."""

    def names_of(self, slot: Slot) -> tuple[str, ...]:
        """The source nodes the shard runs."""
        ...

    def job(self, slot: Slot, job: ShardJob) -> ShardJob:
        """The shard's job as this mode runs it."""
        ...

    def controlled(self, slot: Slot, conn: Any) -> None:
        """The supervisor's end of the shard's control channel (``send``/``recv``), once it
        is started (``wants_control`` modes only)."""
        ...

    def ended(self, slot: Slot) -> None:
        """The shard has ended, or is about to (its channel broke)."""
        ...

    def other(self, slot: Slot, message: tuple[Any, ...]) -> None:
        """A message from the shard that is not a record for the sinks."""
        ...

    def delivered(self, record: dict[str, Any]) -> None:
        """A record the supervisor wrote for a shard's sources itself (``source_down``)."""
        ...


class RunMode:
    """A run: the shards end with their sources; nothing but records comes back."""

    wants_control = False

    def names_of(self, slot: Slot) -> tuple[str, ...]:
        return slot.sources

    def job(self, slot: Slot, job: ShardJob) -> ShardJob:
        return job

    def controlled(self, slot: Slot, conn: Any) -> None:
        raise TypeError("a run's shards have no control channel")

    def ended(self, slot: Slot) -> None:
        """Nothing is held per shard."""

    def other(self, slot: Slot, message: tuple[Any, ...]) -> None:
        """A run's shards send nothing else."""

    def delivered(self, record: dict[str, Any]) -> None:
        """The sinks have it; nothing else is told."""


class Transport(Protocol):
    """How a shard is started, stopped and heard from."""

    def open(self, graph: Any) -> None:
        """Before any shard starts (a cluster reached); ConfigError for a config mistake."""
        ...

    def close(self) -> None:
        """After every shard ended (or none could start)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What it adds to the run's stats (a cluster's address and nodes)."""
        ...

    def run_once(self, slot: Slot, job: ShardJob, mode: Mode, listener: Listener) -> str:
        """Runs the shard once, handing each of its messages to ``listener`` and setting
        ``slot.done`` when it said it was done; returns how it ended."""
        ...

    def stop(self, slot: Slot) -> None:
        """Asks the shard to drain."""
        ...

    def kill(self, slot: Slot) -> None:
        """Ends the shard at once."""
        ...

    def ask_stacks(self, slot: Slot) -> None:
        """Asks a hung shard to write its threads' stacks."""
        ...
