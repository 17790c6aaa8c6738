"""One shard of a service (``run-pipeline serve`` with ``pipeline.shards``): the graph of its
share of the streams, run as a service in its own process, answering the parent's requests
(add, remove, describe, previews, metrics) over a control pipe.

The parent (vapipe/serve/sharded.py) holds the HTTP server and the event sinks. Records go
to it over the records pipe, as in any shard; so do two markers that keep its ledger in step
with the records: ``added`` before a new stream's first record, ``removed`` after its last.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from vapipe.pipeline.config import ConfigSpec, NodeSpec
from vapipe.pipeline.graph import Graph
from vapipe.pipeline.runner import Runner
from vapipe.pipeline.stage import SourceStage, Stage
from vapipe.serve.event_hub import EventHub
from vapipe.serve.prometheus import snapshot
from vapipe.serve.streams import Service, StreamError, template_of, with_tap
from vapipe.shards.worker import Send, ShardJob, subset

log = logging.getLogger(__name__)


def service_spec(spec: ConfigSpec, sources: tuple[str, ...], restart: int) -> ConfigSpec:
    """The shard's graph: its sources, the template that new streams copy (dormant here when
    it is not one of them), and the service's tap."""
    names = [name for name, node in spec.nodes.items() if issubclass(node.stage_cls, SourceStage)]
    template, _ = template_of(spec.serve.template, names)
    keep = sources if template is None or template in sources else (*sources, template)
    return with_tap(subset(spec, keep, restart))


class Dormant(SourceStage):
    """The template source in a shard that does not run it: linked as the config says, so
    that new streams can be linked as it is, but it opens nothing and reads nothing."""

    reads_pixels = False

    def frames(self) -> Iterator[Any]:
        return iter(())


class ForwardingHub(EventHub):
    """The tap's live events, sent to the parent's hub: frame records only while someone
    listens there (the parent says so), messages always."""

    def __init__(self, send: Send) -> None:
        super().__init__()
        self._send = send
        self.forwarding = False

    @property
    def listening(self) -> bool:
        return self.forwarding

    def publish(self, record: dict[str, Any]) -> None:
        self._send(("live", record))


class ShardService:
    """A service's shard, as its worker (vapipe/shards/worker.py) runs it: the job names
    this class, so that the shards' room never imports the service's."""

    graph_spec = staticmethod(service_spec)

    def __init__(
        self, graph: Graph, job: ShardJob, send: Send, make_stage: Callable[[str, NodeSpec], Stage]
    ) -> None:
        self.job = job
        self._send = send
        dormant = set(graph.sources) - set(job.sources)

        def make(name: str, spec: NodeSpec) -> Stage:
            return Dormant(name, spec.config) if name in dormant else make_stage(name, spec)

        self.hub = ForwardingHub(send)
        self.service = Service(graph, self.hub, make_stage=make)
        self.runner = self.service.runner
        self._control: Any = None
        self._reply_lock = threading.Lock()

    def serve(self, control: Any, _runner: Runner) -> None:
        """Once the stages run: the streams this shard had before a restart come back, then
        the parent's requests are answered."""
        edits = dict(self.job.edits)
        for body in self.job.added:
            try:
                self.service.add(dict(body))
            except StreamError as exc:
                log.warning("stream '%s' could not be added again: %s", body["id"], exc.message)
        for stream_id, edit in edits.items():
            try:
                self.service.replace_geometry(stream_id, edit)
            except StreamError as exc:
                log.warning("stream '%s': its lines and zones not set again: %s", stream_id,
                            exc.message)  # fmt: skip
        self._control = control
        self._reply(("hello",))
        threading.Thread(target=self._loop, daemon=True, name="control").start()

    def _loop(self) -> None:
        while True:
            try:
                request = self._control.recv()
            except (EOFError, OSError):  # the parent is gone; SIGTERM follows
                return
            # A remove waits for its stream to drain: the others are answered meanwhile.
            threading.Thread(target=self._answer, args=request, daemon=True).start()

    def _answer(self, request_id: int, operation: str, args: tuple[Any, ...]) -> None:
        try:
            answer: tuple[Any, ...] = (request_id, True, getattr(self, f"_{operation}")(*args))
        except StreamError as exc:
            answer = (request_id, False, (exc.status, exc.message))
        except Exception as exc:
            log.debug("request %s failed", operation, exc_info=True)
            answer = (request_id, False, (500, f"shard {self.job.index}: {exc!r}"))
        self._reply(answer)

    def _reply(self, message: tuple[Any, ...]) -> None:
        with self._reply_lock:
            try:
                self._control.send(message)
            except (OSError, ValueError):
                log.debug("the parent is gone: answer not sent")

    # -- the requests ---------------------------------------------------------------------

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        self._send(("added", body["id"], body["uri"]))
        try:
            return self.service.add(body)
        except BaseException:
            self._send(("removed", body["id"]))
            raise

    def _remove(self, stream_id: str) -> dict[str, Any]:
        removed = self.service.remove(stream_id)
        self._send(("removed", stream_id))
        return removed

    def _describe(self, stream_ids: list[str]) -> list[dict[str, Any]]:
        return [self.service.describe(i) for i in stream_ids if i in self.service.nodes]

    def _geometry(self, stream_id: str) -> dict[str, Any]:
        return self.service.geometry(stream_id)

    def _replace_geometry(self, stream_id: str, body: Any) -> dict[str, Any]:
        return self.service.replace_geometry(stream_id, body)

    def _preview(self, stream_id: str, width: int, after: Any) -> tuple[Any, bytes] | None:
        return self.service.preview(stream_id, width, after)

    def _metrics(self) -> dict[str, Any]:
        return {**snapshot(self.runner.nodes()), "previews": self.service.previews.stats()}

    def _listen(self, listening: bool) -> None:
        self.hub.forwarding = listening
