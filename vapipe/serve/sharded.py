"""A service in shards (``run-pipeline serve`` with ``pipeline.shards = N``): the HTTP API and
the event sinks in this process, the streams in N shard processes (vapipe/serve/shard_side.py).

A new stream goes to the shard with the fewest streams (the lowest index among equals). A shard
that dies is started again as in a run (vapipe/shards/supervisor.py), with the streams it
had, those added over HTTP included, each resuming after what was delivered, and the line/zone
edits it had been sent; meanwhile its streams are ``reconnecting``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
from collections import Counter
from typing import Any

from vapipe.pipeline.graph import Graph, source_id_of, source_type
from vapipe.pipeline.urls import mask_credentials
from vapipe.serve.event_hub import EventHub
from vapipe.serve.shard_side import ShardService
from vapipe.serve.streams import REMOVE_TIMEOUT_S, StreamError, Streams, added_entry
from vapipe.shards.roles import Slot, Transport
from vapipe.shards.supervisor import ShardRunner
from vapipe.shards.worker import ShardJob

log = logging.getLogger(__name__)

ANSWER_S = 10.0  # a shard answers a question about its streams within this
ADD_S = 120.0  # opening a stream may take long (a camera's first connection)


class Control:
    """Requests to one shard process over its control pipe; answers come in any order."""

    def __init__(self, conn: Any, index: int, on_hello: Any) -> None:
        self.conn, self.index = conn, index
        self.hello = threading.Event()
        self.closed = threading.Event()
        self._on_hello = on_hello
        self._pending: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        threading.Thread(target=self._read, daemon=True, name=f"control{index}").start()

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):  # the shard ended
                break
            if message[0] == "hello":
                self.hello.set()
                self._on_hello(self)
                continue
            request_id, ok, value = message
            with self._lock:
                waiter = self._pending.pop(request_id, None)
            if waiter is not None:
                waiter[1].append((ok, value))
                waiter[0].set()
        self.close()

    def close(self) -> None:
        with self._lock:
            self.closed.set()
            pending, self._pending = self._pending, {}
        for answered, _ in pending.values():
            answered.set()

    def tell(self, operation: str, *args: Any) -> None:
        """A request whose answer nobody waits for."""
        self._send(-1, operation, args)

    def call(self, operation: str, *args: Any, timeout: float = ANSWER_S) -> Any:
        answered, box = threading.Event(), list[Any]()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (answered, box)
        self._send(request_id, operation, args)
        if not answered.wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise StreamError(504, f"shard {self.index} did not answer within {timeout:.0f} s")
        if not box:
            raise StreamError(503, f"shard {self.index} is restarting")
        ok, value = box[0]
        if not ok:
            raise StreamError(*value)
        return value

    def _send(self, request_id: int, operation: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            if self.closed.is_set():
                self._pending.pop(request_id, None)
                raise StreamError(503, f"shard {self.index} is restarting")
            try:
                self.conn.send((request_id, operation, args))
            except (OSError, ValueError):
                self._pending.pop(request_id, None)
                raise StreamError(503, f"shard {self.index} is restarting") from None


class ServeMode:
    """What a service's shards run: their streams, those added over HTTP included, each
    shard with a control channel (a pipe to a local shard, an actor's methods on Ray), the
    line and zone edits it was sent, and the live events it forwards to the hub."""

    wants_control = True

    def __init__(self, graph: Graph, hub: EventHub, template: str | None) -> None:
        self.graph, self.hub, self.template = graph, hub, template
        self.controls: dict[int, Control] = {}
        self.edits: dict[str, Any] = {}  # stream id -> its last line/zone edit
        self.supervisor: ShardRunner | None = None
        """Whose ledger the streams added and removed are told to (set once it is made)."""

    def controlled(self, slot: Slot, conn: Any) -> None:
        self.controls[slot.index] = Control(conn, slot.index, self._hello)

    def _hello(self, control: Control) -> None:
        control.tell("listen", self.hub.listening)

    def config_ids(self, slot: Slot) -> set[str]:
        return {source_id_of(self.graph.nodes[name]) for name in slot.sources}

    def ended(self, slot: Slot) -> None:
        control = self.controls.get(slot.index)
        if control is not None:
            control.close()

    def names_of(self, slot: Slot) -> tuple[str, ...]:
        return (*slot.sources, *slot.added)

    def job(self, slot: Slot, job: ShardJob) -> ShardJob:
        ids = self.config_ids(slot) | set(slot.added)
        edits = tuple((i, body) for i, body in list(self.edits.items()) if i in ids)
        return dataclasses.replace(
            job, service=ShardService, added=(*slot.added.values(),), edits=edits
        )

    def other(self, slot: Slot, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "live":
            self.hub.publish(message[1])
            return
        assert self.supervisor is not None  # set when the supervisor is made
        if kind == "added":  # in the records' order: before the stream's first record
            _, stream_id, uri = message
            self.supervisor.ledger.track(stream_id, stream_id, uri, like=str(self.template))
        elif kind == "removed":  # after its last
            self.supervisor.ledger.forget(message[1])

    def delivered(self, record: dict[str, Any]) -> None:
        self.hub.publish(record)  # source_down / source_up of a shard that died


class ShardedService(Streams):
    def __init__(
        self,
        graph: Graph,
        hub: EventHub,
        count: int,
        transport: Transport | None = None,
        **runner_options: Any,
    ) -> None:
        super().__init__(graph, hub)
        self.mode = ServeMode(graph, hub, self.template)
        self.runner = ShardRunner(
            graph, count, transport=transport, mode=self.mode, **runner_options
        )
        self.mode.supervisor = self.runner
        self.stopping = self.runner.stop_requested
        self.where: dict[str, int] = {}  # stream id -> shard index
        for slot in self.runner.slots:
            for stream_id in self.mode.config_ids(slot):
                self.where[stream_id] = slot.index
        self._last: dict[str, dict[str, Any]] = {}
        hub.on_listening = self._listening

    def _listening(self, listening: bool) -> None:
        for control in list(self.mode.controls.values()):
            # A shard starting again is told when it says hello.
            with contextlib.suppress(StreamError):
                control.tell("listen", listening)

    def _shard_of(self, stream_id: str) -> Control:
        index = self.where.get(stream_id)
        if index is None:
            raise StreamError(404, f"no stream '{stream_id}'")
        return self.mode.controls[index]

    # -- what each stream reports --------------------------------------------------------

    def streams(self) -> list[dict[str, Any]]:
        by_shard: dict[int, list[str]] = {}
        for stream_id, index in list(self.where.items()):
            by_shard.setdefault(index, []).append(stream_id)
        described = {}
        for index, stream_ids in sorted(by_shard.items()):
            for entry in self._described(index, stream_ids):
                described[entry["id"]] = entry
        return [described[i] for i in self.where if i in described]

    def describe(self, stream_id: str) -> dict[str, Any]:
        self._shard_of(stream_id)
        found = self._described(self.where[stream_id], [stream_id])
        if not found:
            raise StreamError(404, f"no stream '{stream_id}'")
        return found[0]

    def _described(self, index: int, stream_ids: list[str]) -> list[dict[str, Any]]:
        control = self.mode.controls.get(index)
        try:
            if control is None:
                raise StreamError(503, f"shard {index} is starting")
            entries = control.call("describe", stream_ids)
        except StreamError:
            # The shard is starting (again): its streams as last seen, or opening.
            entries = [
                {**self._last[i], "state": "reconnecting"}
                if i in self._last
                else _unseen(i, self._uri(i))
                for i in stream_ids
            ]
        for entry in entries:
            entry["shard"] = index
            self._last[entry["id"]] = entry
        return list(entries)

    def _uri(self, stream_id: str) -> str:
        if stream_id in self.added:
            return str(self.added[stream_id]["uri"])
        for name in self.graph.sources:
            node = self.graph.nodes[name]
            if source_id_of(node) == stream_id:
                return source_type(node).uri_of(node.config)
        return ""

    def ready(self) -> tuple[bool, str]:
        waiting = [
            str(slot.index)
            for slot in self.runner.slots
            if slot.index not in self.mode.controls
            or not self.mode.controls[slot.index].hello.is_set()
        ]
        if waiting:
            return False, f"shards still opening their stages: {', '.join(waiting)}"
        return self._all_opened()

    # -- adding and removing -------------------------------------------------------------

    def add(self, body: Any) -> dict[str, Any]:
        # The shard opens the input outside this lock (see Service.add): meanwhile the id
        # is held, and the shard it goes to counts it in its load.
        with self._lock:
            spec = self.checked(body, {*self.where, *self._opening})
            load = Counter([*self.where.values(), *self._opening.values()])
            up = [i for i, control in self.mode.controls.items() if control.hello.is_set()]
            index = min((load[i], i) for i in up or [slot.index for slot in self.runner.slots])[1]
            self._opening[spec.name] = index
            self.specs[spec.name] = spec
        entry = added_entry(body)
        try:
            described = self.mode.controls[index].call("add", entry, timeout=ADD_S)
        except BaseException:
            with self._lock:
                del self.specs[spec.name]
            raise
        finally:
            with self._lock:
                del self._opening[spec.name]
        with self._lock:
            self.where[spec.name] = index
            self.added[spec.name] = entry
            self.runner.slots[index].added[spec.name] = entry
        log.info("stream '%s' added to shard %d", spec.name, index)
        return {**described, "shard": index}

    def remove(self, stream_id: str) -> dict[str, Any]:
        with self._lock:
            if stream_id in self._opening:
                raise StreamError(409, f"stream '{stream_id}' is still opening")
            control = self._shard_of(stream_id)
            removed = control.call("remove", stream_id, timeout=REMOVE_TIMEOUT_S + ANSWER_S)
            del self.where[stream_id]
            self.added.pop(stream_id, None)
            self.specs.pop(stream_id, None)
            self.runner.slots[control.index].added.pop(stream_id, None)
            self.mode.edits.pop(stream_id, None)
            self._last.pop(stream_id, None)
        return dict(removed)

    def geometry(self, stream_id: str) -> dict[str, Any]:
        return dict(self._shard_of(stream_id).call("geometry", stream_id))

    def replace_geometry(self, stream_id: str, body: Any) -> dict[str, Any]:
        replaced = self._shard_of(stream_id).call("replace_geometry", stream_id, body)
        self.mode.edits[stream_id] = body
        return dict(replaced)

    def preview(self, stream_id: str, width: int, after: Any = None) -> tuple[Any, bytes] | None:
        return self._shard_of(stream_id).call("preview", stream_id, width, after)

    def metric_snapshots(self) -> list[tuple[str, dict[str, Any]]]:
        taken = []
        for index, control in sorted(self.mode.controls.items()):
            if control.hello.is_set():
                # A shard that is starting again has nothing to show yet.
                with contextlib.suppress(StreamError):
                    node = self.runner.slots[index].node  # None: this machine
                    taken.append((str(index), {**control.call("metrics"), "node": node}))
        return taken


def _unseen(stream_id: str, uri: str) -> dict[str, Any]:
    return {
        "id": stream_id,
        "uri": mask_credentials(uri),
        "state": "opening",
        "fps": 0.0,
        "frames": 0,
        "dropped": 0,
        "reconnects": 0,
        "last_event_time": None,
        "error": None,
        "counts": {},
    }
