"""``[pipeline] cluster = "ray"``: the shards as actors of a Ray cluster.

The shards are the local ones (vapipe/shards/worker.py runs the same job), placed by Ray's
scheduler on whatever node has the resources each asks for (``pipeline.shard_resources``),
spread over the nodes. This process stays the driver: it holds the one real sink of each event
node and the ledger of what was delivered, exactly as with local shards. Each actor keeps the
messages its shard sends in a bounded outbox that the driver polls, so a slow driver holds the
shard back as a full pipe does.

A shard whose actor dies, or whose node is lost, is started again as a new actor on the
resources left (its sources say ``source_down`` with the reason, then ``source_up``); a file
resumes after its last delivered frame and a camera numbers on, so every frame reaches the
sinks once. Actors belong to this process: when it ends, however it ends, Ray ends them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import re
import signal
import threading
import time
from collections import deque
from typing import Any

from vapipe.pipeline.errors import ConfigError, MissingDependencyError
from vapipe.pipeline.overrides import ENV_PATTERN
from vapipe.pipeline.urls import mask_credentials
from vapipe.shards.roles import Listener, Mode, Slot
from vapipe.shards.worker import ShardJob

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How long one poll of an actor's outbox waits for a message."""
OUTBOX = 1024
"""Messages an actor holds for the driver before its shard waits."""
NODE_RECORD_S = 5.0
"""How long a node that Ray's message says died may take to be recorded dead."""
PLACE_S = 120.0
"""How long a shard may wait for the cluster to find it a place before the run fails."""


def import_ray() -> Any:
    # One line per shard message, not Ray's "[repeated 2x across cluster]" summaries.
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "ray", 'cluster = "ray"', extra="ray", key="pipeline.cluster"
        ) from None
    return ray


REACH_S = 10.0
"""How long the cluster's address may take to answer a TCP connection before the run fails
(Ray itself retries a wrong address for ever)."""


def reach(address: str, shown: str) -> None:
    """A one-line error unless ``address`` (``host:port`` or ``ray://host:port``; ``auto`` is
    left to Ray) takes a TCP connection within :data:`REACH_S`."""
    import socket
    from urllib.parse import urlsplit

    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ConfigError(
            f"the Ray address {shown} is not host:port or ray://host:port",
            key="pipeline.ray_address",
        )
    try:
        socket.create_connection((host, port), timeout=REACH_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"cannot reach the Ray cluster at {shown}: {reason}", key="pipeline.ray_address"
        ) from None


class ActorEnd:
    """The shard's end of a service's control channel inside an actor: what a pipe's end is to
    a local shard (``recv`` and ``send``), over two queues the driver reaches through the
    actor's methods."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.outbox: queue.Queue[tuple[Any, ...]] = queue.Queue()

    def recv(self) -> tuple[Any, ...]:
        return self.inbox.get()

    def send(self, message: tuple[Any, ...]) -> None:
        self.outbox.put(message)


class ShardActor:
    """One shard in a Ray worker process (made a Ray actor by :class:`RayActors`): the
    shard runs on a thread, its messages wait in the outbox for :meth:`poll`."""

    def __init__(self) -> None:
        self._outbox: queue.Queue[tuple[Any, ...]] = queue.Queue(OUTBOX)
        self._lock = threading.Lock()
        self._runner: Any = None
        self._stopping = False
        self._control = ActorEnd()

    def start(self, job: ShardJob, control: bool = False) -> dict[str, Any]:
        """Start the shard (a service's, with ``control``: requests come through
        :meth:`control_send`, answers go out through :meth:`control_recv`); where it runs."""
        import ray

        os.environ.update(job.env)
        if job.cwd and os.path.isdir(job.cwd):
            os.chdir(job.cwd)
        threading.Thread(target=self._main, args=(job, control), name="shard", daemon=True).start()
        context = ray.get_runtime_context()
        return {
            "node_id": context.get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "gpus": [str(g) for g in ray.get_gpu_ids()],
        }

    def _main(self, job: ShardJob, control: bool) -> None:
        from vapipe.shards.worker import run_job

        end = self._control if control else None
        try:
            code, error, stats = run_job(job, self._outbox.put, end, on_runner=self._ready)
        except BaseException as exc:  # the driver says it, in one line
            code, error, stats = 1, f"shard {job.index}: {type(exc).__name__}: {exc}", {}
        self._outbox.put(("done", code, error, stats))

    def _ready(self, runner: Any) -> None:
        with self._lock:
            self._runner = runner
            stopping = self._stopping
        if stopping:
            runner.on_signal(signal.SIGTERM, exit_on_repeat=False)

    def poll(self, wait_s: float) -> list[tuple[Any, ...]]:
        """The messages waiting (at least one, unless ``wait_s`` passed without any)."""
        try:
            batch = [self._outbox.get(timeout=wait_s)]
        except queue.Empty:
            return []
        while len(batch) < 256:
            try:
                batch.append(self._outbox.get_nowait())
            except queue.Empty:
                break
        return batch

    def control_send(self, message: tuple[Any, ...]) -> None:
        self._control.inbox.put(message)

    def control_recv(self, wait_s: float) -> list[tuple[Any, ...]]:
        """The shard's answers waiting (at least one, unless ``wait_s`` passed)."""
        try:
            batch = [self._control.outbox.get(timeout=wait_s)]
        except queue.Empty:
            return []
        while True:
            try:
                batch.append(self._control.outbox.get_nowait())
            except queue.Empty:
                return batch

    def stop(self) -> None:
        """Drain the shard, as SIGTERM does to a local one."""
        with self._lock:
            self._stopping = True
            runner = self._runner
        if runner is not None:
            runner.on_signal(signal.SIGTERM, exit_on_repeat=False)


class RayActors:
    """The transport of ``pipeline.cluster = "ray"``: each shard a Ray actor."""

    def __init__(self) -> None:
        self._ray = import_ray()
        self._node_of: dict[int, str] = {}  # slot index -> Ray node id
        self.cluster: dict[str, Any] = {"kind": "ray"}
        self.settings: Any = None
        self._connected = False

    def describe(self) -> dict[str, Any]:
        return {"cluster": self.cluster} if self._connected else {}

    def open(self, graph: Any) -> None:
        self.settings = graph.spec.settings
        self._connect(graph.spec.file)
        self._connected = True

    def close(self) -> None:
        if self._connected:
            self._ray.shutdown()

    def _connect(self, config_file: str | None) -> None:
        ray = self._ray
        address = self.settings.ray_address or os.environ.get("RAY_ADDRESS") or None
        shown = mask_credentials(address) if address else "a Ray instance started here"
        options: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
        if address is None:
            # "local": a new instance, never one that happens to run on this machine (Ray's
            # default would join the newest cluster started here).
            options.update(address="local", include_dashboard=False)
        else:
            options["address"] = address
            try:
                reach(address, shown)
            except ConfigError as exc:  # named with the config it came from
                raise ConfigError(exc.message, file=config_file, key=exc.key) from None
        try:
            ray.init(**options)
        except Exception as exc:  # ConnectionError, or Ray's own for a bad address
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"cannot reach the Ray cluster at {shown}: {reason}",
                file=config_file,
                key="pipeline.ray_address",
            ) from None
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.cluster.update(address=shown, nodes=len(nodes))
        self._actor_class = ray.remote(ShardActor)
        log.info("ray: %s, %d nodes alive", shown, len(nodes))

    @staticmethod
    def for_cluster(job: ShardJob) -> ShardJob:
        """The local shard's job, for another machine: no device (Ray gives the actor its
        GPUs), this process's working directory and the config's variables as set here."""
        named = ENV_PATTERN.findall(" ".join((job.config_text, *job.overrides)))
        env = {name: os.environ[name] for name, _ in named if name in os.environ}
        return dataclasses.replace(job, device=None, cwd=os.getcwd(), env=env)

    def run_once(self, slot: Slot, job: ShardJob, mode: Mode, listener: Listener) -> str:
        ray = self._ray
        job = self.for_cluster(job)
        wanted = self.settings.shard_resources
        actor = self._actor_class.options(
            num_cpus=wanted.num_cpus,
            num_gpus=wanted.num_gpus,
            memory=wanted.memory,
            resources=wanted.resources or None,
            max_restarts=0,
            max_concurrency=8,  # poll, stop and a service's control calls at once
            scheduling_strategy="SPREAD",
        ).remote()
        slot.process = actor
        if mode.wants_control:
            mode.controlled(slot, ActorConn(ray, actor))
        try:
            where = ray.get(actor.start.remote(job, mode.wants_control), timeout=PLACE_S)
        except ray.exceptions.GetTimeoutError:
            self.kill(slot)
            mode.ended(slot)
            return f"not placed within {PLACE_S:.0f} s: no node has {wanted.model_dump()}"
        except ray.exceptions.RayError as exc:
            mode.ended(slot)
            return self._why_it_died(slot, exc)
        self._node_of[slot.index] = where["node_id"]
        slot.node = f"{where['ip']} ({where['node_id'][:8]})"
        log.info(
            "shard%d (ray node %s, pid %d%s): %s",
            slot.index,
            slot.node,
            where["pid"],
            f", GPUs {','.join(where['gpus'])}" if where["gpus"] else "",
            ", ".join(listener.names_of(slot)),
        )
        if listener.stop_requested.is_set():
            self.stop(slot)
        try:
            return self._deliver(slot, actor, listener)
        finally:
            mode.ended(slot)

    def _deliver(self, slot: Slot, actor: Any, listener: Listener) -> str:
        """The shard's records until it is done (then ``done``) or its actor is gone."""
        ray = self._ray
        while True:
            try:
                batch = ray.get(actor.poll.remote(POLL_S))
            except ray.exceptions.RayError as exc:
                return self._why_it_died(slot, exc)
            for message in batch:
                done = listener.handle(slot, message)
                if done is not None:
                    slot.done = done
                    self.kill(slot)
                    return "done"

    def _why_it_died(self, slot: Slot, exc: Exception) -> str:
        """``node lost`` when the shard's node is dead, else ``shard died``. The actor's death
        can reach us before the node's is recorded: where Ray's message blames the node,
        its record is waited for a moment."""
        node = self._node_of.get(slot.index)
        text = str(exc)
        blames_node = re.search(r"\bnode\b.*\b(died|dead|lost|removed)\b", text, re.I | re.S)
        waited = time.monotonic() + (NODE_RECORD_S if blames_node else 0.0)
        while node is not None:
            alive = {n["NodeID"]: n.get("Alive", False) for n in self._ray.nodes()}
            if not alive.get(node, False):
                return f"node lost: {slot.node}"
            if time.monotonic() >= waited:
                break
            time.sleep(0.2)
        self.kill(slot)  # unreachable for now, perhaps not dead: it must not go on
        first = (text.strip().splitlines() or [type(exc).__name__])[0]
        return f"shard died: {type(exc).__name__}: {first[:200]}"

    def stop(self, slot: Slot) -> None:
        if slot.process is not None:
            try:
                slot.process.stop.remote()
            except Exception:  # the actor is gone already: nothing to drain
                log.debug("shard%d: stop not delivered", slot.index)

    def kill(self, slot: Slot) -> None:
        if slot.process is not None:
            try:
                self._ray.kill(slot.process, no_restart=True)
            except Exception:  # gone already
                log.debug("shard%d: already gone", slot.index)

    def ask_stacks(self, slot: Slot) -> None:
        """An actor's stacks are in its worker's log (``ray logs``); none are asked for."""


class ActorConn:
    """The driver's end of a shard's control channel: a pipe end's ``send`` and ``recv``,
    over the actor's methods. ``recv`` raises EOFError once the actor is gone, as a pipe does
    once its process is."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self._ray, self._actor = ray, actor
        self._waiting: deque[tuple[Any, ...]] = deque()

    def send(self, message: tuple[Any, ...]) -> None:
        try:
            self._actor.control_send.remote(message)
        except Exception as exc:  # the actor handle is dead
            raise OSError(f"the shard's actor is gone: {type(exc).__name__}") from None

    def recv(self) -> tuple[Any, ...]:
        while not self._waiting:
            try:
                self._waiting.extend(self._ray.get(self._actor.control_recv.remote(POLL_S)))
            except self._ray.exceptions.RayError:
                raise EOFError("the shard's actor is gone") from None
        return self._waiting.popleft()
