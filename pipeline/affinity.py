"""The CPU cores the runtime's own threads run on: ``[pipeline] python_cpus``.

Every source, stage and sink is a thread of one interpreter, and they take turns at its lock.
Handed between threads on different cores, each turn waits for the next thread's core to wake
and fetch its caches; among threads on a few cores it is an ordinary context switch. Where
the interpreter lock is what bounds a graph (many streams decoded and inferred on a GPU), the
same threads run faster on fewer cores: bench/runtime_per_frame.py (16 stand-in sources, the
real nms node and events sink; bench/results/runtime_python_cpus.json) on the 2-core machine
gave a median 7,901 frames/s on both cores and 11,552 on one (1.46x). Where decoding or
inference runs on the CPU it is the other way (4 files decoded in software, YOLOX-Nano on
ONNX Runtime's CPU provider: 112-115 frames/s, 100-101 on one core), since the threads
FFmpeg and the encoders start from a pinned thread inherit its cores. Not yet measured on a
GPU machine, where it is meant to help: it stays off unless asked for.

Only the runtime's threads are pinned (Linux's affinity is per thread): the main thread,
where stages open and inference runtimes start their thread pools, keeps every core.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from vapipe.pipeline.errors import ConfigError

log = logging.getLogger(__name__)

KEY = "pipeline.python_cpus"


def runtime_cores(setting: int | Sequence[int] | None, shard: int = 0) -> frozenset[int] | None:
    """The cores for ``setting`` (a count: that many of the cores this process may use, shard
    ``shard`` taking the ``shard``-th group of them in turn; a list: those cores), None where
    nothing is pinned (unset, a count of every core, or a system without thread affinity)."""
    if setting is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        log.warning("%s is ignored: this system has no thread affinity (Linux only)", KEY)
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if isinstance(setting, int):
        if setting >= len(allowed):
            return None
        start = shard * setting
        return frozenset(allowed[(start + k) % len(allowed)] for k in range(setting))
    missing = sorted(set(setting) - set(allowed))
    if missing:
        raise ConfigError(
            f"{KEY}: core {', '.join(map(str, missing))} is not one this process may use "
            f"({', '.join(map(str, allowed))})"
        )
    return frozenset(setting)


def pinned(run: Callable[..., Any], cores: frozenset[int] | None) -> Callable[..., Any]:
    """``run``, first moving the thread that calls it onto ``cores`` (None: as it is)."""
    if cores is None:
        return run

    def on_cores(*args: Any) -> Any:
        os.sched_setaffinity(0, cores)  # 0: the calling thread, not the process
        return run(*args)

    return on_cores
