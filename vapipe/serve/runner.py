"""A graph run as a service (``run-pipeline serve``): sources come and go while it runs, and
no source's end or failure ends the run; only a stop request (SIGINT/SIGTERM) does.

A source added at run time is linked as the node it copies is: its frames join the same
queues, so they are batched with every other stream's at once. A source removed stops,
sends ``source_removed`` behind its last frame, and ends its own links; the stages behind it
finish that source's outputs when the message reaches them (the video sink closes its file)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, cast

from vapipe.pipeline import lingering
from vapipe.pipeline.affinity import pinned
from vapipe.pipeline.config import NodeSpec
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Message
from vapipe.pipeline.graph import Graph, link_for, source_type
from vapipe.pipeline.metrics import StageMetrics, queue_summary
from vapipe.pipeline.node import Node
from vapipe.pipeline.queues import Aborted, Inbox
from vapipe.pipeline.runner import Runner
from vapipe.pipeline.stage import SourceStage, SourceStatus, StageContext
from vapipe.pipeline.urls import mask_credentials
from vapipe.pipeline.wiring import context_for

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 10.0  # for a source whose config has no open_timeout_s


class ServiceRunner(Runner):
    def __init__(self, graph: Graph, **kwargs: Any) -> None:
        super().__init__(graph, **kwargs)
        self._held: set[Inbox] = set()
        self._parked: set[Node] = set()
        # A removed source is drained once its source_removed has reached every last stage.
        self._receipts: dict[str, tuple[set[str], threading.Event]] = {}
        self._receipts_lock = threading.Lock()
        # Streams removed during the run: still in its summary, with the frames their links
        # dropped (a removed stream's own link leaves its consumer's inbox).
        self._removed_stages: dict[str, dict[str, Any]] = {}
        self._removed_queues: dict[str, dict[str, Any]] = {}

    def stats(self) -> dict[str, Any]:
        stats = super().stats()
        live = stats["stages"]
        for name, entry in self._removed_stages.items():
            live[name if name not in live else f"{name} (removed)"] = entry
        stats["queues"] = {**self._removed_queues, **stats["queues"]}
        return stats

    def _build(self) -> None:
        super()._build()
        # Held open: with every stream removed, the stages wait for the next one.
        self._held = {
            cast(Inbox, self._nodes[dst].inbox)
            for name in self.graph.sources
            for dst in self.graph.successors(name)
        }
        for inbox in self._held:
            inbox.hold()
        for name, node in self._nodes.items():
            if not self.graph.successors(name):
                node.on_message = lambda message, name=name: self._received(name, message)

    def _received(self, leaf: str, message: Message) -> None:
        if message.kind != "source_removed":
            return
        with self._receipts_lock:
            waiting = self._receipts.get(message.source_id)
        if waiting is not None:
            leaves, drained = waiting
            leaves.discard(leaf)
            if not leaves:
                drained.set()

    def request_stop(self, reason: str = "stop requested") -> None:
        super().request_stop(reason)
        for node in self._take_parked():
            for link in node.outputs:
                link.put_eos()
        for inbox in self._held:
            inbox.release()

    def _take_parked(self, node: Node | None = None) -> list[Node]:
        with self._nodes_lock:
            parked = self._parked
            taken = list(parked) if node is None else [node] if node in parked else []
            parked.difference_update(taken)
        return taken

    def _source_failed(self, node: Node, exc: Exception, item: Any) -> None:
        node.error = str(exc) or type(exc).__name__
        log.warning(
            "%s: %s; the stream stays down until it is removed", node.stage.name, node.error
        )

    def _finish(self, node: Node) -> None:
        if not isinstance(node.stage, SourceStage):
            super()._finish(node)
        elif node.removing:
            self._push_removed(node)
            super()._finish(node)
        elif not self.stop_requested.is_set():
            # Ended by itself (a file's end, a camera given up on): closed, but its links stay
            # open until it is removed, so that its outputs are finished only then.
            outputs, node.outputs = node.outputs, []
            super()._finish(node)
            node.outputs = outputs
            with self._nodes_lock:
                self._parked.add(node)
        else:
            super()._finish(node)

    def _push_removed(self, node: Node) -> None:
        source_id = source_id_of_node(node)
        stage = node.stage
        uri = stage.display_uri if isinstance(stage, SourceStatus) else ""
        where = {"uri": mask_credentials(uri)}
        removed = Message(
            source_id, "source_removed", time.time(), node.last_seq, node.last_pts, where
        )
        with contextlib.suppress(Aborted):  # torn down meanwhile
            node.push(removed)

    def source_ids(self) -> list[str]:
        """Every running source's source_id."""
        return [
            source_id_of_node(node)
            for node in self.nodes().values()
            if isinstance(node.stage, SourceStage)
        ]

    def add_source(
        self, name: str, spec: NodeSpec, like: str, open_timeout_s: float | None = None
    ) -> Node:
        """Open and start source node ``name`` (``spec``), linked as node ``like`` is. Raises
        what its open raises, before anything of it joins the graph; an open that takes
        longer than ``open_timeout_s`` is abandoned (PipelineError)."""
        if self.stop_requested.is_set():
            raise RuntimeError("the service is stopping")
        stage = self._make_stage(name, spec)
        node = Node(stage, None, StageMetrics(name, spec.stage_cls.type_name))
        nodes = self.nodes()
        source_ids = [*self.source_ids(), source_type(spec).source_id_of(name, spec.config)]
        context = context_for(
            self.graph,
            {n: node.stage for n, node in nodes.items()},
            name,
            like=like,
            sources_in_run=len(source_ids),
            source_ids=source_ids,
            stopping=self.stop_requested,
        )
        opening = time.monotonic()
        open_within(stage, context, open_timeout_s or OPEN_TIMEOUT_S)
        node.open_s = time.monotonic() - opening
        for edge in self.graph.edges:
            if edge.src == like:
                own = link_for(self.graph.spec, like, edge.dst, spec)
                inbox = cast(Inbox, nodes[edge.dst].inbox)
                link = inbox.add_link(f"{name} ! {edge.dst}", own.size, own.leaky, True)
                node.outputs.append(link)
        node.workers = node.live_workers = 1
        loop = pinned(self._source_loop, self._cores)  # on python_cpus, as the others
        thread = threading.Thread(target=loop, args=(node,), daemon=True, name=name)
        node.threads.append(thread)
        with self._nodes_lock:
            self._nodes[name] = node
        thread.start()
        return node

    def remove_source(self, name: str, like: str, timeout_s: float | None = None) -> bool:
        """Stop source node ``name`` (linked as ``like`` is) and wait until it is drained: its
        ``source_removed``, behind its last frame, has reached every last stage (the video
        sink has finished its file). False if that took longer than ``timeout_s``."""
        with self._nodes_lock:
            node = self._nodes[name]
        source_id = source_id_of_node(node)
        leaves = {n for n in self.graph.downstream_of(like) if not self.graph.successors(n)}
        drained = threading.Event()
        with self._receipts_lock:
            self._receipts[source_id] = (leaves, drained)
        node.removing = True
        if self._take_parked(node):  # it had ended: it leaves now
            self._push_removed(node)
            for link in node.outputs:
                link.put_eos()
        else:
            cast(SourceStage, node.stage).stop()
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else 1e9)
        stopped = node.finished.wait(timeout_s)
        done = stopped and (not leaves or drained.wait(max(0.0, deadline - time.monotonic())))
        with self._receipts_lock:
            self._receipts.pop(source_id, None)
        if stopped:
            with self._nodes_lock:
                self._nodes.pop(name, None)
            self._removed_stages[name] = {**node.stats(), "removed": True}
            for link in node.outputs:
                self._removed_queues[link.name] = queue_summary(link, link.name.split(" ! ")[-1])
        if done:
            for other in self.nodes().values():
                other.metrics.forget(source_id)
                for link in other.inbox.links if other.inbox is not None else ():
                    if link.stats.dropped_by_source is not None:
                        link.stats.dropped_by_source.pop(source_id, None)
        return done


def open_within(stage: Any, context: StageContext, timeout_s: float) -> None:
    """``stage.open(context)``, given up after ``timeout_s``. A local path can block in the
    kernel's open() with no timeout of FFmpeg's to end it (a FIFO nobody writes, a hung
    mount): the abandoned open goes on in its thread and closes what it opened if it ever
    comes back."""
    done = threading.Event()
    outcome: list[BaseException] = []
    abandoned = threading.Event()

    def attempt() -> None:
        try:
            stage.open(context)
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)
        done.set()
        if abandoned.is_set() and not outcome:
            with contextlib.suppress(Exception):
                stage.close()

    name = f"open {stage.name}"
    lingering.watch(threading.Thread(target=attempt, name=name, daemon=True)).start()
    if not done.wait(timeout_s):
        abandoned.set()
        if not done.is_set():
            shown = stage.display_uri if isinstance(stage, SourceStatus) else stage.name
            uri = mask_credentials(shown)
            raise PipelineError(
                f"cannot open {uri}: no answer within {timeout_s:g} s (open_timeout_s)"
            )
    if outcome:
        raise outcome[0]


def source_id_of_node(node: Node) -> str:
    """The source_id a running source node's frames carry (its name, for a plug-in source
    that keeps none)."""
    stage = node.stage
    return stage.source_id if isinstance(stage, SourceStatus) else stage.name
