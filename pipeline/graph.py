"""Nodes and links: parse ``a ! b ! c`` chains, apply queue settings, check the topology."""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from vapipe.pipeline.config import ConfigSpec, NodeSpec, normalise_link
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.stage import SourceStage
from vapipe.pipeline.validation import suggest


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    size: int
    leaky: Leaky

    @property
    def name(self) -> str:
        return f"{self.src} ! {self.dst}"


@dataclass(frozen=True)
class Graph:
    spec: ConfigSpec
    order: list[str]
    """Node names in topological order, sources first."""
    edges: list[Edge]

    @property
    def nodes(self) -> dict[str, NodeSpec]:
        return self.spec.nodes

    @property
    def sources(self) -> list[str]:
        """The source nodes, in topological order."""
        return [n for n in self.order if issubclass(self.nodes[n].stage_cls, SourceStage)]

    def successors(self, name: str) -> list[str]:
        return [edge.dst for edge in self.edges if edge.src == name]

    def downstream_of(self, name: str) -> list[str]:
        """Nodes reachable from ``name`` (excluded), nearest first."""
        seen: list[str] = []
        frontier = deque(self.successors(name))
        while frontier:
            current = frontier.popleft()
            if current not in seen:
                seen.append(current)
                frontier.extend(self.successors(current))
        return seen


def build(spec: ConfigSpec) -> Graph:
    """Check links and topology; raise ConfigError on the first problem."""
    pairs: list[tuple[str, str]] = []
    for chain in spec.links:
        names = [part.strip() for part in chain.split("!")]
        if len(names) < 2 or not all(names):
            raise spec.error(
                f"link '{chain}' must name at least two nodes: 'a ! b'",
                line=spec.links_line,
                key="links",
            )
        for name in names:
            if name not in spec.nodes:
                raise spec.error(
                    f"link '{chain}' names undefined node '{name}'{suggest(name, spec.nodes)}",
                    line=spec.links_line,
                    key="links",
                )
        for src, dst in pairwise(names):
            if (src, dst) in pairs:
                raise spec.error(
                    f"link '{src} ! {dst}' is declared twice", line=spec.links_line, key="links"
                )
            pairs.append((src, dst))

    for link_name in spec.queues:
        src, _, dst = link_name.partition(" ! ")
        if (src, dst) not in pairs:
            raise spec.error(f'[queues."{link_name}"] names no declared link', key="queues")

    for name, node in spec.nodes.items():
        is_source = issubclass(node.stage_cls, SourceStage)
        has_inputs = any(dst == name for _, dst in pairs)
        if is_source and has_inputs:
            raise spec.error(
                f"a '{node.stage_cls.type_name}' node takes no input, but a link feeds it",
                node=name,
            )
        if not is_source and not has_inputs:
            raise spec.error("not reachable from a source: no link feeds this node", node=name)
        if is_source and not any(src == name for src, _ in pairs):
            raise spec.error("source is not linked to anything", node=name)

    order = _topological_order(spec, pairs)
    edges = [_edge(spec, src, dst) for src, dst in pairs]
    _check_files(spec)
    return Graph(spec=spec, order=order, edges=edges)


def _check_files(spec: ConfigSpec) -> None:
    """No node may write a file that a source reads, or that another node writes."""
    sources = {
        name: node for name, node in spec.nodes.items() if issubclass(node.stage_cls, SourceStage)
    }
    source_ids = [
        node.stage_cls.source_id_of(name, node.config)  # type: ignore[attr-defined]
        for name, node in sources.items()
    ]

    def real(path: str, node: str, key: str) -> str:
        try:
            return os.path.realpath(path)
        except (ValueError, OSError) as exc:  # a NUL byte, a name too long
            raise spec.error(f"invalid path {path!r}: {exc}", node=node, key=key) from None

    owners: dict[str, str] = {}
    for name, node in sources.items():
        for path in node.stage_cls.files_read(node.config):  # type: ignore[attr-defined]
            owners.setdefault(real(path, name, "uri"), f"the input of node '{name}'")
    for name, node in spec.nodes.items():
        try:
            written = node.stage_cls.files_written(node.config, source_ids)
        except ConfigError as exc:
            raise spec.error(exc.message, node=name, key=exc.key) from None
        for path in written:
            resolved = real(path, name, "path")
            if resolved in owners:
                raise spec.error(
                    f"{path} is {owners[resolved]}: writing it would destroy it",
                    node=name,
                    key="path",
                )
            owners[resolved] = f"also written by node '{name}'"


def _edge(spec: ConfigSpec, src: str, dst: str) -> Edge:
    settings = spec.queues.get(normalise_link(f"{src} ! {dst}"))
    size = settings.size if settings and settings.size else spec.settings.queue_size
    if settings and settings.leaky:
        leaky = Leaky(settings.leaky)
    else:
        node = spec.nodes[src]
        live = issubclass(node.stage_cls, SourceStage) and node.stage_cls.is_live(node.config)
        leaky = Leaky.DOWNSTREAM if live else Leaky.NO
    return Edge(src, dst, size, leaky)


def _topological_order(spec: ConfigSpec, pairs: list[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm; what is left over lies on a cycle."""
    indegree = {name: 0 for name in spec.nodes}
    for _, dst in pairs:
        indegree[dst] += 1
    ready = deque(name for name, degree in indegree.items() if degree == 0)
    order: list[str] = []
    while ready:
        current = ready.popleft()
        order.append(current)
        for src, dst in pairs:
            if src == current:
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    ready.append(dst)
    if len(order) < len(spec.nodes):
        cycle = [name for name in spec.nodes if name not in order]
        raise spec.error(
            f"links form a cycle through {', '.join(cycle)}", line=spec.links_line, key="links"
        )
    return order
