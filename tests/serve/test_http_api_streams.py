"""The HTTP layer's streaming and edge answers over a stand-in service, on a scripted clock:
live events (SSE: keepalives only after a quiet spell, dropped-event notices, filters),
snapshots, the MJPEG pacing, and the status of each refusal at its exact limit."""

from __future__ import annotations

import types
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.serve.test_http_api import JSON, LOCAL, StandIn, app_client, preflight
from vapipe.pipeline.config import ServeSettings
from vapipe.serve import http_api
from vapipe.serve.event_hub import Subscriber
from vapipe.serve.http_api import MAX_BODY, make_app
from vapipe.serve.streams import StreamError


class Clock:
    """``time.monotonic`` for http_api: moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(http_api, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What http_api asked asyncio to sleep, each returning at once."""
    asked: list[float] = []

    async def sleep(seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(http_api, "asyncio", types.SimpleNamespace(sleep=sleep))
    return asked


class ScriptedHub:
    """Each take() moves the clock, then returns the next (items, dropped); the service stops
    after the last."""

    dropped_total = 0  # read by the metrics collector

    def __init__(self, service: StandIn, clock: Clock, script: list[tuple[float, list, int]]):
        self.service, self.clock, self.script = service, clock, list(script)
        self.subscribed: list[Subscriber] = []
        self.unsubscribed: list[Any] = []

    def subscribe(self, subscriber: Subscriber) -> ScriptedHub:
        self.subscribed.append(subscriber)
        return self

    def unsubscribe(self, subscriber: Any) -> None:
        self.unsubscribed.append(subscriber)

    def take(self) -> tuple[list, int]:
        step, items, dropped = self.script.pop(0)
        self.clock.now += step
        if not self.script:
            self.service.stopping.set()
        return items, dropped


def test_live_events_keep_alive_only_after_15_quiet_seconds(clock, sleeps) -> None:
    service = StandIn()
    a, b = {"event": "line_crossed", "n": 1}, {"event": "zone_entered", "n": 2}
    hub = ScriptedHub(
        service,
        clock,
        [
            (15.0, [], 0),  # 15 s quiet: not yet
            (0.5, [], 0),  # 15.5 s: a keepalive
            (1.0, [a, b], 0),  # events: the quiet starts again from here
            (15.0, [], 0),  # 15 s since the events: not yet
            (1.0, [], 2),  # a drop notice also counts as something sent
            (0.5, [], 0),
            (15.5, [], 0),  # 16 s since the notice: a keepalive
        ],
    )
    service.hub = hub  # type: ignore[assignment]
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    answer = client.get("/api/events?source=cam1&type=line_crossed,zone_entered")
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.text == (
        ": vapipe live events\n\n"
        ": keepalive\n\n"
        'data: {"event":"line_crossed","n":1}\n\n'
        'data: {"event":"zone_entered","n":2}\n\n'
        ": dropped 2 events (this client reads too slowly)\n\n"
        ": keepalive\n\n"
    )
    (subscriber,) = hub.subscribed
    assert subscriber.source == "cam1"
    assert subscriber.kinds == frozenset({"line_crossed", "zone_entered"})
    assert subscriber.size == service.settings.events_buffer
    assert hub.unsubscribed == [hub], "the client is let go when its stream ends"
    assert sleeps == [http_api.POLL_S] * 7 and 0 < http_api.POLL_S <= 0.1


def test_live_events_without_filters_take_every_source_and_type(clock, sleeps) -> None:
    service = StandIn()
    service.settings = ServeSettings(events_buffer=7)
    hub = ScriptedHub(service, clock, [(0.0, [], 0)])
    service.hub = hub  # type: ignore[assignment]
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    assert client.get("/api/events").text == ": vapipe live events\n\n"
    (subscriber,) = hub.subscribed
    assert (subscriber.source, subscriber.kinds, subscriber.size) == (None, None, 7)


class Pictures(StandIn):
    """A stream whose previews follow a script: a picture (seq, jpeg), None (no new one yet),
    or an exception (the stream removed). Each call takes 0.05 s of the clock."""

    def __init__(self, clock: Clock, script: list[Any], stop_after: int = 99) -> None:
        super().__init__()
        self.settings = ServeSettings(preview_fps=5, preview_width=320)
        self.clock, self.script, self.stop_after = clock, list(script), stop_after
        self.asked: list[Any] = []

    def describe(self, stream_id: str) -> dict[str, Any]:
        return {"id": stream_id}

    def preview(self, stream_id: str, width: int, after: Any = None) -> Any:
        self.asked.append((stream_id, width, after))
        self.clock.now += 0.05
        if len(self.asked) >= self.stop_after:
            self.stopping.set()
        step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        return step


def part(jpeg: bytes) -> bytes:
    return b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n" % (
        len(jpeg),
        jpeg,
    )


def test_the_mjpeg_stream_waits_out_the_rest_of_each_frame_interval(clock, sleeps) -> None:
    service = Pictures(clock, [(1, b"one"), None, (2, b"two")], stop_after=3)
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    assert client.get("/streams/cam/mjpeg").content == part(b"one") + part(b"two")
    # a picture is asked for only when newer than the last one sent
    assert service.asked == [("cam", 320, None), ("cam", 320, 1), ("cam", 320, 1)]
    # 1 / 5 fps = 0.2 s per frame, of which each preview took 0.05 s
    assert sleeps == pytest.approx([0.15, 0.15, 0.15])


def test_a_slow_preview_is_not_followed_by_a_wait(clock, sleeps) -> None:
    service = Pictures(clock, [(1, b"one")], stop_after=1)
    service.settings = ServeSettings(preview_fps=30)  # 0.033 s per frame, less than 0.05
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    assert client.get("/streams/cam/mjpeg").content == part(b"one")
    assert sleeps == [0.0]


def test_the_mjpeg_stream_ends_when_its_stream_is_removed(clock, sleeps) -> None:
    gone = StreamError(404, "no stream 'cam'")
    service = Pictures(clock, [(1, b"one"), gone, (2, b"late")], stop_after=5)
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    assert client.get("/streams/cam/mjpeg").content == part(b"one")
    assert len(service.asked) == 2, "nothing is asked of a removed stream"


def test_a_snapshot_is_the_latest_picture_or_404_before_the_first(clock) -> None:
    service = Pictures(clock, [None, (4, b"\xff\xd8jpeg")])
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    none_yet = client.get("/streams/cam/snapshot.jpg")
    assert (none_yet.status_code, none_yet.json()) == (404, {"error": "no frame yet"})
    got = client.get("/streams/cam/snapshot.jpg")
    assert got.status_code == 200 and got.headers["content-type"] == "image/jpeg"
    assert got.content == b"\xff\xd8jpeg"
    assert service.asked == [("cam", 320, None), ("cam", 320, None)]


def test_unknown_paths_and_methods_answer_404_and_405_in_one_line() -> None:
    client = app_client()
    missing = client.get("/api/nothing")
    assert (missing.status_code, missing.json()) == (404, {"error": "no such path: /api/nothing"})
    wrong = client.put("/api/streams", json={})
    assert (wrong.status_code, wrong.json()) == (
        405,
        {"error": "PUT is not allowed on /api/streams"},
    )


def test_ready_is_200_when_the_service_is() -> None:
    service = StandIn()
    service.ready = lambda: (True, "")  # type: ignore[method-assign]
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    answer = client.get("/readyz")
    assert (answer.status_code, answer.json()) == (200, {"ready": True, "reason": ""})


def padded(size: int) -> bytes:
    body = b'{"id": "b", "uri": "x"}'
    return body + b" " * (size - len(body))


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(chunked: bool) -> None:
    service = StandIn()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]

    def send(body: bytes) -> Any:
        content = (body[i : i + 65536] for i in range(0, len(body), 65536)) if chunked else body
        return client.post("/api/streams", content=content, headers=JSON)

    assert send(padded(MAX_BODY)).status_code == 201
    assert service.added == [{"id": "b", "uri": "x"}]
    over = send(padded(MAX_BODY + 1))
    assert (over.status_code, over.json()) == (413, {"error": "request body over 1048576 bytes"})
    assert len(service.added) == 1


def test_content_type_parameters_are_allowed_and_other_types_refused() -> None:
    service = StandIn()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    body = b'{"id": "b", "uri": "x"}'
    typed = {"Content-Type": "Application/JSON; charset=utf-8"}
    assert client.post("/api/streams", content=body, headers=typed).status_code == 201
    for kind in ("application/csv", "text/plain", "application/x-www-form-urlencoded"):
        refused = client.post("/api/streams", content=body, headers={"Content-Type": kind})
        assert refused.status_code == 415, kind
        assert refused.json() == {"error": f"expected Content-Type: application/json, got '{kind}'"}


def test_an_empty_body_needs_no_content_type_and_is_a_bad_request() -> None:
    service = StandIn()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    empty = client.post("/api/streams", content=b"", headers={"Content-Type": "text/plain"})
    assert empty.status_code == 400
    assert empty.json()["error"].startswith("the body is not JSON: ")
    broken = client.post("/api/streams", content=b"{", headers=JSON)
    assert broken.status_code == 400 and service.added == []


def test_a_host_below_the_bound_address_is_not_it() -> None:
    client = app_client("192.168.7.5")
    answer = client.get("/api/config", headers={"Host": "192.168.7.4:8080"})
    assert answer.status_code == 421


def test_a_cors_preflight_needs_no_token() -> None:
    dash = "https://dash.example"
    service = StandIn()
    service.settings = ServeSettings(cors_origins=[dash])
    client = TestClient(make_app(service, token="t0ken-t0ken"), base_url=LOCAL)  # type: ignore[arg-type]
    answer = preflight(client, dash)
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == dash
    assert client.get("/api/streams", headers={"Origin": dash}).status_code == 401
