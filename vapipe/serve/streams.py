"""The streams of a running service: adding one (a copy of the template source node, with the
caller's options, validated as the config is), removing one, and what each reports."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Collection
from typing import Any

from vapipe.pipeline.config import ConfigSpec, NodeSpec
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.graph import Graph, build, source_id_of, source_type
from vapipe.pipeline.stage import LiveGeometry, SourceStatus, Stage
from vapipe.pipeline.urls import mask_also, mask_credentials, register_secrets_in, secrets_in
from vapipe.pipeline.validation import validate
from vapipe.serve import media_roots
from vapipe.serve.event_hub import EventHub
from vapipe.serve.previews import Previews
from vapipe.serve.prometheus import snapshot
from vapipe.serve.runner import ServiceRunner
from vapipe.serve.tap import ServiceTap, render
from vapipe.stages.media.live import LiveStream
from vapipe.stages.sinks.live import LiveSink

TAP = "_service"
STREAM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
REMOVE_TIMEOUT_S = 60.0


class StreamError(Exception):
    """A request about streams that cannot be done: an HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = mask_credentials(message)


def with_tap(spec: ConfigSpec) -> ConfigSpec:
    """The config with the service's tap linked behind the last stage that feeds others (the
    one the sinks read), so that it sees what they see; with a redact node, behind one (its
    previews and live streams are pictures that leave the process too)."""
    graph = build(spec)
    upstream = [
        name
        for name in graph.order
        if (graph.successors(name) or graph.nodes[name].stage_cls.redacts)
        and (not graph.redacted or name in graph.redacted)
    ][-1]
    tap = NodeSpec(TAP, ServiceTap, ServiceTap.Config(), None)
    return dataclasses.replace(
        spec, nodes={**spec.nodes, TAP: tap}, links=[*spec.links, f"{upstream} ! {TAP}"]
    )


def template_of(wanted: str | None, sources: list[str]) -> tuple[str | None, str | None]:
    """The source node new streams copy (``serve.template``, or the only source), or why
    there is none."""
    if wanted is None:
        if len(sources) == 1:
            return sources[0], None
        return None, (
            f"the config has {len(sources)} sources: set serve.template to the one new streams copy"
        )
    if wanted not in sources:
        raise ConfigError(
            f"'{wanted}' is not a source node ({', '.join(sources)})", key="serve.template"
        )
    return wanted, None


class Streams:
    """What a service of one process and one of shards share: the template, the checks of a
    new stream's request, and the effective config."""

    def __init__(self, graph: Graph, hub: EventHub) -> None:
        self.graph = graph
        self.hub = hub
        self.settings = graph.spec.serve
        self._lock = threading.Lock()  # one change of the streams at a time
        # Stream ids being added, their input opening -> the shard they go to (0: this one).
        self._opening: dict[str, int] = {}
        self.added: dict[str, dict[str, Any]] = {}
        # The source nodes of the streams added (and those being added): every new stream is
        # checked against them too.
        self.specs: dict[str, NodeSpec] = {}
        self.template, self.template_problem = template_of(self.settings.template, graph.sources)

    def checked(self, body: Any, taken: Collection[str]) -> NodeSpec:
        """The new stream's source node, from a POST body (``taken``: the stream ids in use).
        The body's secrets are masked from now on only once it is accepted: a refused one is
        masked in its own error and forgotten (bodies full of secrets cannot grow the set)."""
        try:
            spec = self._checked(body, taken)
        except StreamError as exc:
            exc.message = mask_also(exc.message, secrets_in(body))
            raise
        register_secrets_in(body)
        return spec

    def _checked(self, body: Any, taken: Collection[str]) -> NodeSpec:
        if not isinstance(body, dict):
            raise StreamError(400, 'expected a JSON object: {"id": ..., "uri": ...}')
        unknown = sorted(set(body) - {"id", "uri", "options"})
        if unknown:
            raise StreamError(422, f"unknown key '{unknown[0]}'; valid keys: id, uri, options")
        stream_id, uri, options = body.get("id"), body.get("uri"), body.get("options", {})
        if not isinstance(stream_id, str) or not STREAM_ID.fullmatch(stream_id):
            raise StreamError(
                400, "id: 1 to 64 letters, digits, '_' or '-', starting with a letter or digit"
            )
        if not isinstance(uri, str) or not uri:
            raise StreamError(400, "uri: expected a string")
        if not isinstance(options, dict):
            raise StreamError(422, "options: expected a table of source keys")
        if self.template is None:
            raise StreamError(409, self.template_problem or "no template source")
        if stream_id in taken or stream_id in self.graph.nodes:
            raise StreamError(409, f"a stream or node '{stream_id}' exists already")
        template = self.graph.nodes[self.template]
        table = {
            **template.config.model_dump(exclude_unset=True),
            **{k: v for k, v in options.items() if k != "type"},
            "uri": uri,
            "source_id": stream_id,
        }
        try:
            config = validate(
                template.stage_cls.Config, table, "POST /api/streams", "", node=stream_id
            )
        except ConfigError as exc:
            raise StreamError(422, str(exc)) from None
        try:
            files = source_type(template).files_read(config)
        except ConfigError as exc:
            raise StreamError(422, str(exc)) from None
        refused = media_roots.refusal(uri, files, self.settings.media_roots)
        if refused is not None:
            raise StreamError(403, refused)
        spec = NodeSpec(stream_id, template.stage_cls, config, None)
        self._check_in_graph(spec)
        return spec

    def _check_in_graph(self, new: NodeSpec) -> None:
        """The graph as it would run with ``new`` (and every stream added before it) is
        checked as a config is: an input that is an output, an output that would destroy an
        input, one file that several streams would write (409, in the config's words)."""
        spec = self.graph.spec
        nodes = {**spec.nodes, **self.specs, new.name: new}
        hops = [edge.dst for edge in self.graph.edges if edge.src == self.template]
        links = [*spec.links, *(f"{added} ! {hop}" for added in [*self.specs, new.name]
                                for hop in hops)]  # fmt: skip
        try:
            build(dataclasses.replace(spec, nodes=nodes, links=links))
        except ConfigError as exc:
            raise StreamError(409, str(exc)) from None

    def _like(self, node_name: str) -> str:
        """The config node a stream's source is linked as: itself, or the template it copies."""
        return node_name if node_name in self.graph.nodes else str(self.template)

    # What the HTTP API asks of either kind (docs/api.md says what each returns).
    stopping: threading.Event

    def streams(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def describe(self, stream_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def ready(self) -> tuple[bool, str]:
        raise NotImplementedError

    def add(self, body: Any) -> dict[str, Any]:
        raise NotImplementedError

    def remove(self, stream_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def geometry(self, stream_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def replace_geometry(self, stream_id: str, body: Any) -> dict[str, Any]:
        raise NotImplementedError

    def preview(self, stream_id: str, width: int, after: Any = None) -> tuple[Any, bytes] | None:
        raise NotImplementedError

    def live_stream(self, stream_id: str) -> LiveStream:
        """The stream's live video (one process only: shards send no frames to the parent)."""
        raise StreamError(501, "live video needs the service in one process (shards = 1)")

    def metric_snapshots(self) -> list[tuple[str, dict[str, Any]]]:
        raise NotImplementedError

    def _all_opened(self) -> tuple[bool, str]:
        waiting = [s["id"] for s in self.streams() if s["state"] == "opening"]
        if waiting:
            return False, f"streams not open yet: {', '.join(waiting)}"
        return True, "ready"

    def effective_config(self) -> dict[str, Any]:
        """The graph as it runs: the config's nodes and the streams added, secrets masked."""
        nodes = {
            name: {"type": node.stage_cls.type_name, **node.config.model_dump(mode="json")}
            for name, node in self.graph.nodes.items()
            if name != TAP
        }
        return _masked(
            {
                "file": self.graph.spec.file,
                "links": [chain for chain in self.graph.spec.links if TAP not in chain],
                "nodes": nodes,
                "streams_added": list(self.added.values()),
                "template": self.template,
            }
        )


class Service(Streams):
    """The streams of one ServiceRunner, by stream id (a source's source_id)."""

    def __init__(
        self,
        graph: Graph,
        hub: EventHub,
        make_stage: Callable[[str, NodeSpec], Stage] | None = None,
    ) -> None:
        super().__init__(graph, hub)
        self.tap = ServiceTap(TAP, hub)
        self.previews = Previews(render, graph.spec.serve.preview_cpu_share)
        self._make_other = make_stage or (lambda name, spec: spec.stage_cls(name, spec.config))
        self.runner = ServiceRunner(graph, make_stage=self._make_stage)
        self.stopping = self.runner.stop_requested
        # Stream id -> source node name; the config's own sources first.
        self.nodes: dict[str, str] = {
            source_id_of(graph.nodes[name]): name for name in graph.sources
        }

    def _make_stage(self, name: str, spec: NodeSpec) -> Stage:
        return self.tap if name == TAP else self._make_other(name, spec)

    # -- what each stream reports --------------------------------------------------------

    def streams(self) -> list[dict[str, Any]]:
        return [self.describe(stream_id) for stream_id in list(self.nodes)]

    def describe(self, stream_id: str) -> dict[str, Any]:
        node_name = self.nodes.get(stream_id)
        if node_name is None:
            raise StreamError(404, f"no stream '{stream_id}'")
        node = self.runner.nodes().get(node_name)
        view = self.tap.view(stream_id)
        stage = node.stage if node is not None else None
        status = stage if isinstance(stage, SourceStatus) else None
        if node is None or node.removing:
            state = "stopping"
        elif node.finished.is_set():
            state = "down"
        else:
            state = view.state
        return {
            "id": stream_id,
            "uri": status.display_uri if status else "",
            "state": state,
            "fps": view.fps(),
            "frames": view.frames,
            "dropped": self._dropped(stream_id),
            "reconnects": status.reconnects if status else 0,
            "last_event_time": view.last_event_time,
            # Why it is down, else why a camera is not open now (reconnecting): one line.
            "error": (node.error or (status.last_error if status else None)) if node else None,
            "counts": view.counts,
            **self._live_of(stream_id),
        }

    def _live_of(self, stream_id: str) -> dict[str, Any]:
        """The stream's live video, once anyone asked for it: encoded, viewers now."""
        node = self._live_node()
        live = (node.streams if node is not None else self.tap.live).get(stream_id)
        return {"live": live.stats()} if live is not None else {}

    def _dropped(self, stream_id: str) -> int:
        total = 0
        for node in self.runner.nodes().values():
            if node.inbox is not None:
                for link in node.inbox.links:
                    if link.stats.dropped_by_source:
                        total += link.stats.dropped_by_source[stream_id]
        return total

    def ready(self) -> tuple[bool, str]:
        """Every model loaded (the runner started) and every stream opened once or
        reconnecting."""
        if self.runner.ready_at is None:
            return False, "the pipeline is still opening its stages"
        return self._all_opened()

    # -- adding and removing -------------------------------------------------------------

    def add(self, body: Any) -> dict[str, Any]:
        # Opened outside the lock: one input that takes long to open (a FIFO nobody writes)
        # must not hold up the other adds and removes. Its id is held meanwhile.
        with self._lock:
            spec = self.checked(body, {*self.nodes, *self._opening})
            self._opening[spec.name] = 0
            self.specs[spec.name] = spec
        try:
            timeout_s = source_type(spec).open_timeout_s(spec.config)
            self.runner.add_source(spec.name, spec, str(self.template), timeout_s)
        except (ConfigError, PipelineError) as exc:
            with self._lock:
                del self.specs[spec.name]
            raise StreamError(422, str(exc)) from None
        finally:
            with self._lock:
                del self._opening[spec.name]
        with self._lock:
            self.nodes[spec.name] = spec.name
            self.added[spec.name] = added_entry(body)
        return self.describe(spec.name)

    def remove(self, stream_id: str) -> dict[str, Any]:
        with self._lock:
            node_name = self.nodes.get(stream_id)
            if node_name is None and stream_id in self._opening:
                raise StreamError(409, f"stream '{stream_id}' is still opening")
            if node_name is None:
                raise StreamError(404, f"no stream '{stream_id}'")
            if not self.runner.remove_source(node_name, self._like(node_name), REMOVE_TIMEOUT_S):
                raise StreamError(504, f"stream '{stream_id}' did not stop within 60 s")
            del self.nodes[stream_id]
            self.added.pop(stream_id, None)
            self.specs.pop(stream_id, None)
        self.previews.forget(stream_id)  # a stream added again later starts afresh
        return {"id": stream_id, "state": "removed"}

    def _analytics(self, stream_id: str) -> LiveGeometry:
        """The analytics stage this stream's frames reach (409 if the graph has none)."""
        self.describe(stream_id)  # 404 for an unknown stream
        stages = self.runner.stages
        for name in self.graph.downstream_of(self._like(self.nodes[stream_id])):
            stage = stages.get(name)
            if isinstance(stage, LiveGeometry):
                return stage
        raise StreamError(409, "the graph has no analytics node for this stream's frames")

    def geometry(self, stream_id: str) -> dict[str, Any]:
        return dict(self._analytics(stream_id).geometry(stream_id))

    def replace_geometry(self, stream_id: str, body: Any) -> dict[str, Any]:
        stage = self._analytics(stream_id)
        if not isinstance(body, dict) or set(body) - {"lines", "zones"}:
            raise StreamError(400, 'expected a JSON object: {"lines": [...], "zones": [...]}')
        try:
            stage.replace_geometry(
                stream_id, body.get("lines", []), body.get("zones", []),
                f"PUT /api/streams/{stream_id}/analytics",
            )  # fmt: skip
        except ConfigError as exc:
            raise StreamError(422, str(exc)) from None
        return dict(stage.geometry(stream_id))

    def preview(self, stream_id: str, width: int, after: Any = None) -> tuple[Any, bytes] | None:
        """The stream's latest frame drawn and as JPEG, ``width`` wide, with a key that
        tells it apart; None if there is none yet, or it is still the one of key ``after``."""
        self.describe(stream_id)  # 404 for an unknown stream
        return self.previews.picture(stream_id, self.tap.view(stream_id).latest, width, after)

    def live_stream(self, stream_id: str) -> LiveStream:
        """The stream's live video: a ``live`` node's (encoded once for its RTSP viewers and
        the page's), else the service's own, made when first watched."""
        self.describe(stream_id)  # 404 for an unknown stream
        node = self._live_node()
        return node.stream(stream_id) if node is not None else self.tap.live_stream(stream_id)

    def _live_node(self) -> LiveSink | None:
        """The graph's (first) live node, whose streams the page plays; None without one."""
        return next((s for s in self.runner.stages.values() if isinstance(s, LiveSink)), None)

    def metric_snapshots(self) -> list[tuple[str, dict[str, Any]]]:
        live = {"live": self.tap.live_stats()} if self.tap.live else {}
        return [("0", {**snapshot(self.runner.nodes()), "previews": self.previews.stats(), **live})]


def added_entry(body: dict[str, Any]) -> dict[str, Any]:
    """A stream added, as the effective config lists it (and a restarted shard adds it)."""
    return {"id": body["id"], "uri": body["uri"], "options": body.get("options", {})}


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, str):
        return mask_credentials(value)
    return value
