"""``run-pipeline serve`` with ``pipeline.cluster = "ray"``: a service's shards as Ray actors.

The HTTP API, the event sinks and the ledger stay in this process, as with local shards
(pipeline/serve/sharded.py), and so does the placing of new streams (on the shard with the
fewest). What differs is the way to a shard: its records come through the actor's outbox
(pipeline/shards/ray_actors.py) and its control channel, a pipe for a local shard, through the
actor's ``control_send`` / ``control_recv``. A shard whose node is lost comes back on another
with its streams, those added over HTTP included, and their line and zone edits.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from vapipe.pipeline.serve.sharded import Control, ServiceShardRunner
from vapipe.pipeline.shards.ray_actors import POLL_S, RayShardRunner
from vapipe.pipeline.shards.supervisor import Slot


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


class RayServiceShardRunner(ServiceShardRunner, RayShardRunner):
    """A service's shards (streams added and removed, previews, metrics) as Ray actors."""

    def _attach_control(self, slot: Slot, actor: Any) -> bool:
        self.controls[slot.index] = Control(ActorConn(self._ray, actor), slot.index, self._hello)
        return True
