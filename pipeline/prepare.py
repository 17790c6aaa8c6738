"""The models and sample clips a graph's nodes need, found or fetched before any node
opens: shared by the commands and the Python API."""

from __future__ import annotations

from pydantic import BaseModel

from vapipe.pipeline import assets
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.graph import Graph


def prepare_assets(graph: Graph) -> None:
    """Every model and sample clip the nodes need, found or fetched before any node opens;
    first, every file given by path (a model, an input) is there."""
    check_local_files(graph)
    assets.prepare(
        [
            assets.Needed(kind, name, node)
            for node, spec_node in graph.nodes.items()
            for kind, name in spec_node.stage_cls.assets_needed(spec_node.config)
        ]
    )


def check_local_files(graph: Graph) -> None:
    """A model path that is no file, or an input file that is not there, fails the run before
    any model loads, naming its node and key (and the ``--set`` that gave it)."""
    for name, node in graph.nodes.items():
        try:
            for key, model in models_named(node.config):
                try:
                    assets.local_file("models", model)
                except ConfigError as exc:
                    raise ConfigError(exc.message, key=key) from None
            node.stage_cls.check_inputs(node.config)
        except ConfigError as exc:
            raise graph.spec.error(exc.message, node=name, key=exc.key) from None


def models_named(config: BaseModel, prefix: str = "") -> list[tuple[str, str]]:
    """(key, value) of every ``model`` key of a node's config and of its tables
    (``appearance.model``): each is checked before any model loads."""
    found = []
    for key in type(config).model_fields:
        value = getattr(config, key)
        if key == "model" and isinstance(value, str):
            found.append((prefix + key, value))
        elif isinstance(value, BaseModel):
            found += models_named(value, f"{prefix}{key}.")
    return found
