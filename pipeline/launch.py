"""When this process started, on the monotonic clock: start-up phases are reported from the
launch (interpreter start and imports included), not from when the runner got control."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vapipe.pipeline.node import Node


@cache
def launched_at() -> float:
    """``time.monotonic()`` at this process's start (Linux: /proc; elsewhere: first call)."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as handle:
            # Field 22 is the start time in clock ticks since boot; the name (field 2) may
            # hold spaces, so count from its closing parenthesis.
            fields = handle.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        age = 0.0
    return time.monotonic() - max(age, 0.0)


def since_launch(moment: float | None = None) -> float:
    """Seconds from this process's start to ``moment`` (monotonic; default: now)."""
    return (time.monotonic() if moment is None else moment) - launched_at()


def startup_phases(
    runner_at: float, ready_s: float | None, last_nodes: Sequence[Node]
) -> dict[str, float | None]:
    """Seconds from launch: to the runner (interpreter, imports, config), to every stage
    open and started, to the first frame out of the graph's last stages."""
    first = [n.metrics.first_at for n in last_nodes if n.metrics.first_at is not None]
    return {
        "to_runner_s": round(since_launch(runner_at), 3) if runner_at else None,
        "to_ready_s": round(ready_s, 3) if ready_s is not None else None,
        "to_first_output_s": round(since_launch(min(first)), 3) if first else None,
    }
