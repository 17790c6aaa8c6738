"""The models and sample clips a graph's nodes need, found or fetched before any node
opens: shared by the commands and the Python API."""

from __future__ import annotations

from vapipe.pipeline import assets
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.stage import StageConfig

NATIVE_CONFLICTS = (
    (
        ("vaapi", "hwaccel"),
        "migraphx",
        "VA-API decoding (Mesa's driver and its LLVM) and MIGraphX (ROCm's own LLVM) abort "
        "in one process ('LLVM ERROR: Option already exists', NixOS/nixpkgs#499005); decode "
        "on the CPU (remove hwaccel) or run that model on another provider (providers = "
        '"cpu", or "rocm" with onnxruntime-rocm)',
    ),
)
"""Native stacks that cannot share a process: (the first, and the key that asks for it in
its node), the second, and why with what to change. Each node's config declares the stacks
it loads (a ``native_stacks()`` method on the config or on any of its tables)."""


def prepare_assets(graph: Graph) -> None:
    """Every model and sample clip the nodes need, found or fetched before any node opens;
    first, every file given by path (a model, an input) is there, and no two nodes load
    native stacks that abort together."""
    check_local_files(graph)
    check_native_stacks(graph)
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


def models_named(config: StageConfig) -> list[tuple[str, str]]:
    """(key, value) of every model a node's config and its tables name (``model``,
    ``appearance.model``): each is checked before any model loads."""
    return [
        (f"{prefix}{key}", model)
        for prefix, table in config.tables()
        for key, model in table.models().items()
    ]


def native_stacks(config: StageConfig) -> frozenset[str]:
    """The native stacks a node's config and its tables declare (``native_stacks()``)."""
    return frozenset().union(*(table.native_stacks() for _, table in config.tables()))


def check_native_stacks(graph: Graph) -> None:
    """Two nodes whose native stacks abort in one process (every shard runs every node) are
    refused before anything loads, in one line that names both and what to change."""
    loaded = {name: native_stacks(node.config) for name, node in graph.nodes.items()}
    for (first, key), second, why in NATIVE_CONFLICTS:
        having = [name for name, stacks in loaded.items() if first in stacks]
        beside = [name for name, stacks in loaded.items() if second in stacks]
        if having and beside:
            raise graph.spec.error(
                f"{first} here and {second} in node '{beside[0]}' cannot share a process: {why}",
                node=having[0],
                key=key,
            )
