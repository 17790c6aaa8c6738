"""Nodes and links: parse ``a ! b ! c`` chains, apply queue settings, check the topology."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

from vapipe.pipeline.config import ConfigSpec, NodeSpec, normalise_link
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.outputs import FileClaims
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.stage import SourceStage
from vapipe.pipeline.validation import cut, listed, suggest

# Stated limits: past them a config is refused at once rather than built for minutes (a
# thread per node: 10,000 nodes is already far past what one process runs well).
MAX_NODES = 10_000
MAX_LINKS = 20_000


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
    redacted: frozenset[str] = frozenset()
    """Nodes that every path from a source reaches through a ``redacts`` node (or that are
    one): what they see has been redacted."""
    _after: dict[str, list[str]] = field(init=False, repr=False, compare=False)
    _before: dict[str, list[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Each node's neighbours once: the runtime asks for them per node (thousands of them).
        after: dict[str, list[str]] = {}
        before: dict[str, list[str]] = {}
        for edge in self.edges:
            after.setdefault(edge.src, []).append(edge.dst)
            before.setdefault(edge.dst, []).append(edge.src)
        object.__setattr__(self, "_after", after)
        object.__setattr__(self, "_before", before)

    @property
    def nodes(self) -> dict[str, NodeSpec]:
        return self.spec.nodes

    @property
    def sources(self) -> list[str]:
        """The source nodes, in topological order."""
        return [n for n in self.order if issubclass(self.nodes[n].stage_cls, SourceStage)]

    @property
    def source_ids(self) -> list[str]:
        """The source_id of each source node's frames, in topological order."""
        return [source_id_of(self.nodes[name]) for name in self.sources]

    def successors(self, name: str) -> list[str]:
        return list(self._after.get(name, ()))

    def predecessors(self, name: str) -> list[str]:
        return list(self._before.get(name, ()))

    def downstream_of(self, name: str) -> list[str]:
        """Nodes reachable from ``name`` (excluded), nearest first."""
        return self._reachable(name, self.successors)

    def upstream_of(self, name: str) -> list[str]:
        """Nodes from which ``name`` is reachable (excluded), nearest first."""
        return self._reachable(name, self.predecessors)

    @staticmethod
    def _reachable(name: str, step: Callable[[str], list[str]]) -> list[str]:
        seen: dict[str, None] = {}  # an ordered set
        frontier = deque(step(name))
        while frontier:
            current = frontier.popleft()
            if current not in seen:
                seen[current] = None
                frontier.extend(step(current))
        return list(seen)


def source_id_of(node: NodeSpec) -> str:
    """The source_id a source node's frames carry."""
    return source_type(node).source_id_of(node.name, node.config)


def source_type(node: NodeSpec) -> type[SourceStage]:
    stage_cls = node.stage_cls
    if not issubclass(stage_cls, SourceStage):
        raise TypeError(f"node '{node.name}' is not a source")
    return stage_cls


def build(spec: ConfigSpec, also_written: Mapping[str, str] | None = None) -> Graph:
    """Check links, topology and files; raise ConfigError on the first problem.
    ``also_written``: files the run writes besides its nodes' (path -> what writes it)."""
    if len(spec.nodes) > MAX_NODES:
        raise spec.error(
            f"{len(spec.nodes):,} nodes: a pipeline has at most {MAX_NODES:,} "
            "(split the sources over several configs or shards)"
        )
    pairs: dict[tuple[str, str], None] = {}  # an ordered set
    for chain in spec.links:
        names = [part.strip() for part in chain.split("!")]
        if len(names) < 2 or not all(names):
            raise spec.error(
                f"link '{cut(chain)}' must name at least two nodes: 'a ! b'",
                line=spec.links_line,
                key="links",
            )
        for name in names:
            if name not in spec.nodes:
                raise spec.error(
                    f"link '{cut(chain)}' names undefined node '{cut(name)}'"
                    f"{suggest(name, spec.nodes)}",
                    line=spec.links_line,
                    key="links",
                )
        for src, dst in pairwise(names):
            if (src, dst) in pairs:
                raise spec.error(
                    f"link '{src} ! {dst}' is declared twice", line=spec.links_line, key="links"
                )
            pairs[src, dst] = None
            if len(pairs) > MAX_LINKS:
                raise spec.error(
                    f"more than {MAX_LINKS:,} links: a pipeline has at most that many",
                    line=spec.links_line,
                    key="links",
                )

    for link_name in spec.queues:
        src, _, dst = link_name.partition(" ! ")
        if (src, dst) not in pairs:
            raise spec.error(f'[queues."{link_name}"] names no declared link', key="queues")

    fed = {dst for _, dst in pairs}
    feeding = {src for src, _ in pairs}
    for name, node in spec.nodes.items():
        is_source = issubclass(node.stage_cls, SourceStage)
        has_inputs = name in fed
        if is_source and has_inputs:
            raise spec.error(
                f"a '{node.stage_cls.type_name}' node takes no input, but a link feeds it",
                node=name,
            )
        if not is_source and not has_inputs:
            raise spec.error("not reachable from a source: no link feeds this node", node=name)
        if is_source and name not in feeding:
            raise spec.error("source is not linked to anything", node=name)

    order = _topological_order(spec, list(pairs))
    _check_upstream(spec, list(pairs), order)
    redacted = _check_redaction(spec, list(pairs), order)
    edges = [_edge(spec, src, dst) for src, dst in pairs]
    _check_files(spec, also_written or {})
    return Graph(spec=spec, order=order, edges=edges, redacted=redacted)


def _check_redaction(
    spec: ConfigSpec, pairs: list[tuple[str, str]], order: list[str]
) -> frozenset[str]:
    """The nodes behind a ``redacts`` node; with one in the graph, a node that writes pictures
    and is not behind one is refused: its pictures would leave unredacted."""
    guards = {name for name, node in spec.nodes.items() if node.stage_cls.redacts}
    if not guards:
        return frozenset()
    feeders: dict[str, list[str]] = {}
    for src, dst in pairs:
        feeders.setdefault(dst, []).append(src)
    covered = _covered(order, feeders, guards)
    for name in order:
        node = spec.nodes[name]
        if covered[name] or not node.stage_cls.writes_pictures(node.config):
            continue
        source = _uncovered_source(covered, feeders, name)
        raise spec.error(
            f"writes pictures, but the way from source '{source}' to it passes no redact node "
            f"({listed(sorted(guards))}): its pictures would leave unredacted; link it after "
            "one (... ! redact ! ... ! " + name + ")",
            node=name,
        )
    return frozenset(name for name, done in covered.items() if done)


def _check_upstream(spec: ConfigSpec, pairs: list[tuple[str, str]], order: list[str]) -> None:
    """A node that needs a node of some type before it (analytics after track) gets one on
    every path from a source, found now rather than at the first frame. Each question
    ("is every path to here through X?") is answered for all nodes in one pass in
    topological order, so that a config of thousands of nodes is checked in linear time."""
    feeders: dict[str, list[str]] = {}
    for src, dst in pairs:
        feeders.setdefault(dst, []).append(src)
    by_type: dict[tuple[str, ...], dict[str, bool]] = {}
    by_node: dict[str, dict[str, bool]] = {}
    for name, node in spec.nodes.items():
        for other in node.stage_cls.reads_results_of(node.config):
            if other not in spec.nodes:
                raise spec.error(
                    f"reads the results of node '{other}', which does not exist", node=name
                )
            if other not in by_node:
                by_node[other] = _covered(order, feeders, {other})
            if not _all_through(by_node[other], feeders, name):
                source = _uncovered_source(by_node[other], feeders, name)
                raise spec.error(
                    f"reads the results of node '{other}', which is not on its way from source "
                    f"'{source}' (link ... ! {other} ! ... ! {name})",
                    node=name,
                )
        needed = node.stage_cls.upstream_needed(node.config)
        if not needed:
            continue
        if needed not in by_type:
            of_type = {n for n, s in spec.nodes.items() if s.stage_cls.type_name in needed}
            by_type[needed] = _covered(order, feeders, of_type)
        if not _all_through(by_type[needed], feeders, name):
            source = _uncovered_source(by_type[needed], feeders, name)
            wanted = " or ".join(f"'{kind}'" for kind in needed)
            raise spec.error(
                f"needs a {wanted} node before it, on the way from source '{source}' "
                f'(e.g. links = ["... ! nms ! {needed[0]} ! {name}"])',
                node=name,
            )


def _covered(order: list[str], feeders: dict[str, list[str]], through: set[str]) -> dict[str, bool]:
    """For each node: whether every path from a source to it, itself included, passes a node
    of ``through``."""
    covered: dict[str, bool] = {}
    for name in order:
        before = feeders.get(name)
        covered[name] = name in through or (bool(before) and all(covered[f] for f in before or ()))
    return covered


def _all_through(covered: dict[str, bool], feeders: dict[str, list[str]], name: str) -> bool:
    """Whether every path into ``name`` (not counting ``name`` itself) is covered."""
    return all(covered[f] for f in feeders.get(name, ()))


def _uncovered_source(covered: dict[str, bool], feeders: dict[str, list[str]], name: str) -> str:
    """A source from which a path reaches ``name`` without a covered node."""
    current = next(f for f in feeders[name] if not covered[f])
    while current in feeders:
        current = next(f for f in feeders[current] if not covered[f])
    return current


def _check_files(spec: ConfigSpec, also_written: Mapping[str, str]) -> None:
    """No node may write a file that a source reads, or that another node writes; nor may
    the run's other outputs (``also_written``: path -> what writes it, e.g. ``--stats``)."""
    sources = {
        name: node for name, node in spec.nodes.items() if issubclass(node.stage_cls, SourceStage)
    }
    source_ids = [source_id_of(node) for node in sources.values()]
    claims = FileClaims()
    for name, node in sources.items():
        try:
            for names in source_type(node).files_read(node.config):
                claims.read(names, f"the input of node '{name}'")
        except ConfigError as exc:
            raise spec.error(exc.message, node=name, key="uri") from None
    for name, node in spec.nodes.items():
        try:
            node.stage_cls.check_for_sources(node.config, source_ids)
            for names in node.stage_cls.files_written(node.config, source_ids):
                clash = claims.write(names, f"node '{name}'")
                if clash is not None:
                    raise ConfigError(
                        f"{names} is {clash}: writing it would destroy it", key="path"
                    )
        except ConfigError as exc:
            raise spec.error(exc.message, node=name, key=exc.key) from None
    for path, writer in also_written.items():
        clash = claims.write(path, writer)
        if clash is not None:
            raise ConfigError(f"{writer} {path} is {clash}: writing it would destroy it")


def _edge(spec: ConfigSpec, src: str, dst: str, node: NodeSpec | None = None) -> Edge:
    """The link ``src ! dst`` as configured; ``node``: a source added at run time in place of
    ``src`` (a camera added to a file's template gets a camera's leaky default)."""
    settings = spec.queues.get(normalise_link(f"{src} ! {dst}"))
    size = settings.size if settings and settings.size else spec.settings.queue_size
    if settings and settings.leaky:
        leaky = Leaky(settings.leaky)
    else:
        node = node or spec.nodes[src]
        live = issubclass(node.stage_cls, SourceStage) and node.stage_cls.is_live(node.config)
        leaky = Leaky.DOWNSTREAM if live else Leaky.NO
    return Edge(src, dst, size, leaky)


def link_for(spec: ConfigSpec, like: str, dst: str, node: NodeSpec) -> Edge:
    """The link of a source node added while the graph runs, linked as node ``like`` is:
    ``like``'s queue settings, and the added source's own kind's default policy."""
    return _edge(spec, like, dst, node)


def _topological_order(spec: ConfigSpec, pairs: list[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm; what is left over lies on a cycle."""
    indegree = {name: 0 for name in spec.nodes}
    after: dict[str, list[str]] = {}
    for src, dst in pairs:
        indegree[dst] += 1
        after.setdefault(src, []).append(dst)
    ready = deque(name for name, degree in indegree.items() if degree == 0)
    order: list[str] = []
    while ready:
        current = ready.popleft()
        order.append(current)
        for dst in after.get(current, ()):
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    if len(order) < len(spec.nodes):
        placed = set(order)
        cycle = [name for name in spec.nodes if name not in placed]
        raise spec.error(
            f"links form a cycle through {listed(cycle)}", line=spec.links_line, key="links"
        )
    return order
