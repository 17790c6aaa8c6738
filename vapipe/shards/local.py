"""Shards as processes of this machine: forked from the forkserver (vapipe/shards/
forkserver.py), their records over a pipe, a service's control channel over a second one,
SIGTERM to drain and SIGKILL to end them."""

from __future__ import annotations

import logging
from typing import Any

from vapipe.pipeline.outcome import exit_text
from vapipe.shards.forkserver import ask_stacks, kill, shard_context, terminate
from vapipe.shards.roles import Done, Listener, Mode, Slot
from vapipe.shards.worker import ShardJob, run_shard

log = logging.getLogger(__name__)

JOIN_S = 10.0
"""A shard that said "done" but does not exit is killed after this."""


class LocalProcesses:
    """The transport of ``pipeline.shards = N`` on one machine."""

    def __init__(self) -> None:
        self.context: Any = None

    def open(self, graph: Any) -> None:
        self.context = shard_context(graph)

    def close(self) -> None:
        """Nothing is held once the processes have ended."""

    def describe(self) -> dict[str, Any]:
        return {}

    def run_once(self, slot: Slot, job: ShardJob, mode: Mode, listener: Listener) -> str:
        reader, writer = self.context.Pipe(duplex=False)
        extra: tuple[Any, ...] = ()
        if mode.wants_control:
            ours, theirs = self.context.Pipe(duplex=True)
            mode.controlled(slot, ours)
            extra = (theirs,)
        slot.process = self.context.Process(
            target=run_shard, args=(job, writer, *extra), name=f"vapipe-shard{slot.index}"
        )
        slot.process.start()
        writer.close()
        for end in extra:
            end.close()  # the child's ends: theirs now
        log.info(
            "shard%d (pid %d%s): %s",
            slot.index,
            slot.process.pid,
            f", device {slot.device}" if slot.device else "",
            ", ".join(listener.names_of(slot)) or "no streams yet",
        )
        if listener.stop_requested.is_set():
            self.stop(slot)
        slot.done = read(slot, reader, listener)
        reader.close()
        mode.ended(slot)
        slot.process.join(JOIN_S if slot.done else None)
        if slot.process.is_alive():
            kill(slot.process)
            slot.process.join()
        return exit_text(slot.process.exitcode)

    def stop(self, slot: Slot) -> None:
        terminate(slot.process)

    def kill(self, slot: Slot) -> None:
        kill(slot.process)

    def ask_stacks(self, slot: Slot) -> None:
        ask_stacks(slot.process)


def read(slot: Slot, reader: Any, listener: Listener) -> Done | None:
    """The shard's messages until it says it is done (or its pipe breaks: None)."""
    while True:
        try:
            message = reader.recv()
        except Exception:  # EOF, or half a message from a process that was killed
            return None
        done = listener.handle(slot, message)
        if done is not None:
            return done
