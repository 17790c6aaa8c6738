"""The models and sample clips a graph's nodes need, found or fetched before any node
opens: shared by the commands and the Python API."""

from __future__ import annotations

from vapipe.pipeline import assets
from vapipe.pipeline.graph import Graph


def prepare_assets(graph: Graph) -> None:
    """Every model and sample clip the nodes need, found or fetched before any node opens."""
    assets.prepare(
        [
            assets.Needed(kind, name, node)
            for node, spec_node in graph.nodes.items()
            for kind, name in spec_node.stage_cls.assets_needed(spec_node.config)
        ]
    )
