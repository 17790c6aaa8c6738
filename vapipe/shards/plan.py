"""How a run's sources are placed on shards: how many shards, and which sources each runs.

Sources go round robin in config order (shard 0 gets sources 0, N, 2N, ...): each shard gets
the same count, give or take one. By count only: a source's resolution and rate are known once
it opens, inside its shard, after the placement. With ``pipeline.devices`` the shards take the
GPUs in turn; in a cluster each shard asks for ``pipeline.shard_resources`` and the cluster's
scheduler picks the node. The log names each shard's sources when it starts, and ``--stats``
lists them per shard (with the node it ran on, in a cluster).
"""

from __future__ import annotations

import os

CORES_PER_SHARD = 2  # measured: 16 x 1080p on 16 cores, 8 shards beat 4 by 1.4x
CORES_PER_SHARD_GPU_DECODED = 4
"""With every source on a GPU's video decoder the cores no longer decode, and each shard is one
more CUDA context the GPU time-slices: measured on the H100 machine, 16 x 1080p on NVDEC in 4
shards 2,067 frames/s, in 8 shards 1,677 (bench/results/headline.json, "nvdec")."""


def shard_count(
    setting: int | str,
    sources: int | None = None,
    cpus: int | None = None,
    gpu_decoded: bool = False,
) -> int:
    """Shards to start: the setting, ``"auto"`` as one per 2 cores (per 4 where every source
    decodes on a GPU), never more than ``sources`` (a service, whose streams come later, gives
    none)."""
    if setting == "auto":
        per_shard = CORES_PER_SHARD_GPU_DECODED if gpu_decoded else CORES_PER_SHARD
        wanted = max(1, (cpus or os.cpu_count() or 1) // per_shard)
    else:
        wanted = int(setting)
    return max(1, min(wanted, sources if sources is not None else wanted))


def partition(sources: list[str], count: int) -> list[tuple[str, ...]]:
    """Round robin, in config order: shard 0 gets sources 0, N, 2N, ..."""
    return [tuple(sources[index::count]) for index in range(count)]
