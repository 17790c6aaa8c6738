"""Ray's multi-node test cluster on this machine (``ray.cluster_utils.Cluster``): a head and
worker nodes, each a raylet of its own with the CPUs it is said to have."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def ray_cluster(head_cpus: int, workers: int, worker_cpus: int = 2) -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    made = Cluster(
        initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False}
    )
    try:
        for _ in range(workers):
            made.add_node(num_cpus=worker_cpus)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()


def on(cluster: Any) -> tuple[str, ...]:
    """The ``--set`` arguments that run a config's shards on ``cluster``."""
    return ("--set", "pipeline.cluster='ray'", "--set", f"pipeline.ray_address='{cluster.address}'")


def worker_nodes(cluster: Any) -> dict[str, Any]:
    """The worker nodes by the first 8 characters of their id (as the log shows them)."""
    return {node.node_id[:8]: node for node in cluster.worker_nodes}
