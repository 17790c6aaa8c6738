"""Shard processes forked from a server that has imported, once, what every shard imports.

Spawned, each shard imported numpy, OpenCV, PyAV, onnxruntime and vapipe's stages itself, and
torch where the graph runs it: 2.5-4.5 s each on the GPU machine with 8 shards importing at
once. A forkserver (Python's own) imports them before the first shard and forks each shard
from there, so a shard starts with them loaded. Nothing the server imports may start a GPU
context or a thread pool that a fork would break: importing torch does neither (CUDA starts
on first use, in the shard, after it has set its CUDA_VISIBLE_DEVICES). Also here: the signals
the parent sends its shard processes (drain, kill, stacks).
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import signal
from typing import Any

from vapipe.pipeline.graph import Graph

BASE = ["numpy", "cv2", "av", "vapipe.shards.worker", "vapipe.pipeline.runner"]


def preloaded(graph: Graph) -> list[str]:
    """What the graph's shards will import: its stages' modules, and what their configs
    declare (``preloads``: onnxruntime for a backend, torch where it may run)."""
    modules = list(BASE)
    for spec in graph.nodes.values():
        modules.append(spec.stage_cls.__module__)
        for _, table in spec.config.tables():
            modules.extend(table.preloads())
    return [m for m in dict.fromkeys(modules) if importlib.util.find_spec(m) is not None]


def shard_context(graph: Graph) -> Any:
    """The multiprocessing context shards start in: a forkserver where there is one (Linux,
    macOS), with the graph's modules preloaded; else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preloaded(graph))
    return context


def terminate(process: Any) -> None:
    """SIGTERM: the shard drains."""
    if process is not None and process.is_alive():
        with contextlib.suppress(OSError, ValueError):  # it ended meanwhile
            process.terminate()


def kill(process: Any) -> None:
    if process is not None and process.is_alive():
        with contextlib.suppress(OSError, ValueError):
            process.kill()


def ask_stacks(process: Any) -> None:
    """Have a shard write every thread's stack to its log (faulthandler on SIGUSR1, which
    vapipe/shards/worker.py registers): what a shard that does not drain was doing."""
    if process is not None and process.is_alive() and process.pid is not None:
        with contextlib.suppress(OSError):
            os.kill(process.pid, signal.SIGUSR1)
