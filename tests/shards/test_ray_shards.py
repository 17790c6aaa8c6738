"""The Ray side of shards without a cluster: why a shard ended, what an address must look
like, and the control channel's ends."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.shards.ray_actors import ActorConn, ActorEnd, RayActors, reach
from vapipe.shards.supervisor import Slot


class FakeRay:
    """What the runner asks of Ray: its nodes (alive or not) and its errors."""

    class RayError(Exception):
        pass

    exceptions = SimpleNamespace(RayError=RayError)

    def __init__(self, alive: dict[str, bool]) -> None:
        self.alive = alive

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": node, "Alive": alive} for node, alive in self.alive.items()]


def test_a_shard_on_a_dead_node_was_lost_with_it_else_it_died() -> None:
    runner = RayActors()
    slot = Slot(1, ("b",), None, node="10.0.0.7 (9f2c41d0)")
    runner._node_of[1] = "9f2c41d0aa"
    error = RuntimeError("The actor died unexpectedly before finishing this task.\nmore")
    runner._ray = FakeRay({"9f2c41d0aa": False, "other": True})
    assert runner._why_it_died(slot, error) == "node lost: 10.0.0.7 (9f2c41d0)"
    runner._ray = FakeRay({"9f2c41d0aa": True})
    assert runner._why_it_died(slot, error) == (
        "shard died: RuntimeError: The actor died unexpectedly before finishing this task."
    )
    # Ray's message blames the node before its death is recorded: it is waited for.
    late = FakeRay({"9f2c41d0aa": True})
    asked = []

    def nodes() -> list[dict[str, Any]]:
        asked.append(1)
        late.alive["9f2c41d0aa"] = len(asked) < 3
        return FakeRay.nodes(late)

    late.nodes = nodes  # type: ignore[method-assign]
    runner._ray = late
    blamed = RuntimeError("The actor is dead because its node has died. Node Id: 9f2c41d0aa")
    assert runner._why_it_died(slot, blamed) == "node lost: 10.0.0.7 (9f2c41d0)"
    assert len(asked) == 3


def test_an_address_must_be_host_and_port_and_answer() -> None:
    with pytest.raises(ConfigError, match="is not host:port or ray://host:port"):
        reach("head-without-port", "head-without-port")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    reach(f"127.0.0.1:{port}", "shown")  # something answers: Ray is left to say the rest
    reach(f"ray://127.0.0.1:{port}", "shown")
    listener.close()
    with pytest.raises(ConfigError, match="cannot reach the Ray cluster at shown: "):
        reach(f"ray://127.0.0.1:{port}", "shown")
    reach("auto", "auto")  # Ray's own lookup, not an address


def test_the_control_channel_carries_both_ways_and_ends_with_its_actor() -> None:
    end = ActorEnd()

    class Actor:
        """The two actor methods the driver's end calls, run at once here."""

        gone = False

        class Method:
            def __init__(self, call: Any) -> None:
                self.remote = call

        def __init__(self) -> None:
            self.control_send = self.Method(end.inbox.put)
            self.control_recv = self.Method(self._recv)

        def _recv(self, wait_s: float) -> Any:
            if self.gone:
                raise FakeRay.RayError("actor died")
            return [end.outbox.get(timeout=wait_s)] if not end.outbox.empty() else []

    ray = FakeRay({})
    ray.get = lambda value: value  # type: ignore[attr-defined]
    actor = Actor()
    conn = ActorConn(ray, actor)
    conn.send((1, "describe", (["a"],)))
    assert end.recv() == (1, "describe", (["a"],))
    end.send((1, True, []))
    end.send(("hello",))
    assert [conn.recv(), conn.recv()] == [(1, True, []), ("hello",)]
    actor.gone = True
    with pytest.raises(EOFError):
        conn.recv()
