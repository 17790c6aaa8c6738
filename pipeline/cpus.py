"""How many cores this process may use: decoders and encoders share them out, and the
shard plan counts them (the runtime's, so that stages need not reach into the shards' room)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1
