"""The HTTP layer alone, over a stand-in for the service: a handler that fails answers 500
with one line and the service keeps answering; the token and the body limit hold on every
path they guard."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from vapipe.pipeline.config import ServeSettings
from vapipe.serve.event_hub import EventHub
from vapipe.serve.http_api import MAX_BODY, json_body, make_app
from vapipe.serve.streams import StreamError

LOCAL = "http://localhost:8080"  # the Host the service answers to (TestClient's is testserver)
JSON = {"Content-Type": "application/json"}
STREAM = {"id": "cam", "uri": "x.mp4", "state": "running", "fps": 1.0, "frames": 3,
          "dropped": 0, "reconnects": 0, "last_event_time": None}  # fmt: skip


class StandIn:
    """Answers like a Service, and fails where told to."""

    def __init__(self) -> None:
        self.settings = ServeSettings()
        self.hub = EventHub()
        self.stopping = threading.Event()
        self.fail_with: Exception | None = None
        self.added: list[Any] = []
        self.graph = SimpleNamespace(nodes={})  # no history node, no media nodes

    def streams(self) -> list[dict[str, Any]]:
        if self.fail_with is not None:
            raise self.fail_with
        return [STREAM]

    def describe(self, stream_id: str) -> dict[str, Any]:
        raise StreamError(404, f"no stream '{stream_id}'")

    def add(self, body: Any) -> dict[str, Any]:
        self.added.append(body)
        return {"id": body["id"]}

    def ready(self) -> tuple[bool, str]:
        return False, "the pipeline is still opening its stages"

    def metric_snapshots(self) -> list[tuple[str, dict[str, Any]]]:
        return [("0", {"stages": {}, "gpu_memory_bytes": None})]


def test_a_failing_handler_is_one_line_and_the_service_answers_on() -> None:
    service = StandIn()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    service.fail_with = RuntimeError("disk on fire\nsecond line")
    failed = client.get("/api/streams")
    assert failed.status_code == 500
    assert failed.json() == {"error": "internal error: RuntimeError: disk on fire second line"}
    service.fail_with = None
    assert client.get("/api/streams").json() == [STREAM]
    assert client.get("/readyz").status_code == 503
    assert client.get("/api/streams/nope").json() == {"error": "no stream 'nope'"}


def test_token_and_body_limit() -> None:
    service = StandIn()
    client = TestClient(make_app(service, token="s3cret-token"), base_url=LOCAL)  # type: ignore[arg-type]
    assert client.get("/healthz").status_code == 200
    assert client.get("/").status_code == 200, "the page itself holds no data"
    assert client.get("/favicon.ico").status_code == 204, "a browser's own request: no token"
    assert client.get("/api/streams").status_code == 401
    wrong = {"Authorization": "Bearer s3cret-tokenx"}
    assert client.get("/api/streams", headers=wrong).status_code == 401
    good = {"Authorization": "Bearer s3cret-token"}
    assert client.get("/api/streams", headers=good).status_code == 200
    big = client.post("/api/streams", headers=good, content=b"[" + b"0," * (600 << 10) + b"0]")
    assert big.status_code == 413 and service.added == []
    added = client.post("/api/streams", headers=good, json={"id": "b", "uri": "x"})
    assert added.status_code == 201 and service.added == [{"id": "b", "uri": "x"}]


def test_history_and_media_need_the_token_and_media_takes_the_pages_cookie() -> None:
    client = TestClient(make_app(StandIn(), token="s3cret-token"), base_url=LOCAL)  # type: ignore[arg-type]
    good = {"Authorization": "Bearer s3cret-token"}
    for path in ("/api/events/history", "/api/counts?line=a", "/api/events/x/1", "/media/a.jpg"):
        assert client.get(path).status_code == 401, path
        # past the guard: 404, as this graph has no history and no media folders
        assert client.get(path, headers=good).status_code == 404, path
    client.cookies.set("vapipe_token", "s3cret-token")
    assert client.get("/media/a.jpg").status_code == 404  # the cookie let it through
    assert client.get("/api/events/history").status_code == 401  # data needs the header
    client.cookies.set("vapipe_token", "s3cret-tokenx")
    assert client.get("/media/a.jpg").status_code == 401


def test_a_body_without_a_length_is_read_only_up_to_the_limit() -> None:
    class Endless:
        """A chunked upload that never ends: 64 KiB at a time."""

        def __init__(self) -> None:
            self.sent = 0

        async def stream(self):  # type: ignore[no-untyped-def]
            while True:
                self.sent += 1
                yield b"0" * (64 << 10)

    upload = Endless()
    with pytest.raises(StreamError) as refused:
        asyncio.run(json_body(upload))  # type: ignore[arg-type]
    assert refused.value.status == 413
    assert upload.sent == MAX_BODY // (64 << 10) + 1, "read past the limit"

    class Chunked:
        async def stream(self):  # type: ignore[no-untyped-def]
            for part in (b'{"id": ', b'"c", "uri": ', b'"x"}'):
                yield part

    assert asyncio.run(json_body(Chunked())) == {"id": "c", "uri": "x"}  # type: ignore[arg-type]


def test_a_chunked_upload_over_the_limit_is_refused_by_the_app() -> None:
    service = StandIn()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]

    def chunks():  # no Content-Length: httpx sends it chunked
        for _ in range(40):
            yield b" " * (32 << 10)

    refused = client.post("/api/streams", content=chunks(), headers=JSON)
    assert refused.status_code == 413 and service.added == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/streams"), ("POST", "/api/streams"), ("GET", "/api/streams/cam"),
     ("DELETE", "/api/streams/cam"), ("GET", "/api/streams/cam/analytics"),
     ("PUT", "/api/streams/cam/analytics"), ("GET", "/api/config"), ("GET", "/api/events"),
     ("GET", "/metrics"), ("GET", "/readyz"), ("GET", "/streams/cam/snapshot.jpg"),
     ("GET", "/streams/cam/mjpeg")],
)  # fmt: skip
def test_with_a_token_every_path_but_health_and_the_page_needs_it(method: str, path: str) -> None:
    # Answered before any handler runs: nothing of the service is reached without the token.
    service = StandIn()
    client = TestClient(make_app(service, token="t0ken-t0ken"), base_url=LOCAL)  # type: ignore[arg-type]
    service.fail_with = AssertionError(f"{method} {path} reached the service")
    refused = client.request(method, path)
    assert refused.status_code == 401, (method, path, refused.status_code)
    assert (
        client.request(method, path, headers={"Authorization": "Bearer t0ken-t0ke"}).status_code
        == 401
    )


def app_client(host: str = "127.0.0.1", base_url: str = LOCAL, **serve: Any) -> TestClient:
    service = StandIn()
    service.settings = ServeSettings(**serve)
    return TestClient(make_app(service, host=host), base_url=base_url)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bound", "host_header", "serve", "status"),
    [("127.0.0.1", "evil.example:8080", {}, 421),  # a rebinding page names its own site
     ("127.0.0.1", "localhost:8080", {}, 200), ("127.0.0.1", "127.0.0.1:8080", {}, 200),
     ("127.0.0.1", "[::1]:8080", {}, 200), ("127.0.0.1", "127.0.0.2", {}, 200),
     ("127.0.0.1", "cams.lan:8080", {"allowed_hosts": ["cams.lan"]}, 200),
     ("127.0.0.1", "CAMS.lan", {"allowed_hosts": ["cams.lan"]}, 200),
     ("127.0.0.1", "other.lan", {"allowed_hosts": ["cams.lan"]}, 421),
     ("127.0.0.1", "any.where", {"allowed_hosts": ["*"]}, 200),
     ("192.168.7.5", "192.168.7.5:8080", {}, 200), ("192.168.7.5", "192.168.7.6:8080", {}, 421),
     ("0.0.0.0", "box.lan:8080", {}, 200), ("::", "box.lan", {}, 200)],
)  # fmt: skip
def test_a_host_that_is_not_this_service_s_is_refused(
    bound: str, host_header: str, serve: dict[str, Any], status: int
) -> None:
    client = app_client(bound, **serve)
    answer = client.get("/api/config", headers={"Host": host_header})
    # 200 is the stand-in's 500 here (it has no config): what matters is the Guard let it by.
    assert (answer.status_code if answer.status_code == 421 else 200) == status, answer.text
    if status == 421:
        assert answer.json()["error"] == (
            f"Host '{host_header.rsplit(':', 1)[0].lower() if ']' not in host_header else '::1'}'"
            " is not this service's: add it to [serve] allowed_hosts"
        )


def test_no_other_site_s_page_can_add_or_remove_a_stream() -> None:
    client = app_client()
    body = {"id": "b", "uri": "x"}
    evil = client.post("/api/streams", json=body, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    assert evil.json()["error"] == (
        "cross-site request refused: Origin http://evil.example "
        "(add the page's origin to [serve] cors_origins)"
    )
    # A "simple" request (no preflight): text/plain, no Origin sent by the test.
    plain = client.post("/api/streams", content=b'{"id": "b", "uri": "x"}',
                        headers={"Content-Type": "text/plain"})  # fmt: skip
    assert plain.status_code == 415
    fetched = client.post("/api/streams", json=body, headers={"Sec-Fetch-Site": "cross-site"})
    assert fetched.status_code == 403
    sibling = client.post("/api/streams", json=body, headers={"Sec-Fetch-Site": "same-site"})
    assert sibling.status_code == 403
    gone = client.delete("/api/streams/cam", headers={"Origin": "http://evil.example"})
    assert gone.status_code == 403
    # The service's own page: same origin.
    own = client.post(
        "/api/streams",
        json=body,
        headers={"Origin": LOCAL, "Sec-Fetch-Site": "same-origin"},
    )
    assert own.status_code == 201, own.text
    # Reading is not refused by Origin (no state changes; the token guards data).
    assert client.get("/api/streams", headers={"Origin": "http://evil.example"}).status_code == 200
    assert (
        "access-control-allow-origin"
        not in client.get("/api/streams", headers={"Origin": "http://evil.example"}).headers
    )


def preflight(client: TestClient, origin: str) -> Any:
    """A browser's question before a cross-origin POST with a token and a JSON body."""
    return client.options(
        "/api/streams",
        headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"},
    )  # fmt: skip


def test_cors_origins_let_a_configured_dashboard_in() -> None:
    dash = "https://dash.example"
    client = app_client(cors_origins=[dash])
    added = client.post("/api/streams", json={"id": "b", "uri": "x"}, headers={"Origin": dash})
    assert added.status_code == 201, added.text
    assert added.headers["access-control-allow-origin"] == dash
    answer = preflight(client, dash)
    assert answer.status_code == 200
    assert "POST" in answer.headers["access-control-allow-methods"]
    other = client.post("/api/streams", json={"id": "c", "uri": "x"},
                        headers={"Origin": "https://other.example"})  # fmt: skip
    assert other.status_code == 403


def test_json_nested_too_deep_is_a_bad_request() -> None:
    client = app_client()
    deep = b"[" * 100_000 + b"]" * 100_000
    answer = client.post("/api/streams", content=deep, headers=JSON)
    assert answer.status_code == 400
    assert answer.json()["error"] == "the body is not JSON this service reads: nested too deep"


class Previewing(StandIn):
    """A stream whose preview is a new picture at every call; the service stops after three."""

    def __init__(self) -> None:
        super().__init__()
        self.settings = ServeSettings(preview_fps=5)
        self.asked: list[Any] = []

    def describe(self, stream_id: str) -> dict[str, Any]:
        return STREAM

    def preview(self, stream_id: str, width: int, after: Any = None) -> tuple[int, bytes]:
        self.asked.append((stream_id, width, after))
        seq = len(self.asked)
        if seq == 3:
            self.stopping.set()
        return seq, b"JPEG" + bytes([seq]) * seq


def test_the_mjpeg_preview_is_one_part_per_new_picture_at_the_preview_rate() -> None:
    service = Previewing()
    client = TestClient(make_app(service), base_url=LOCAL)  # type: ignore[arg-type]
    started = time.monotonic()
    response = client.get("/streams/cam/mjpeg")
    took = time.monotonic() - started
    assert response.headers["content-type"] == "multipart/x-mixed-replace; boundary=frame"
    expected = b"".join(
        b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n%s\r\n"
        % (4 + seq, b"JPEG" + bytes([seq]) * seq)
        for seq in (1, 2, 3)
    )
    assert response.content == expected
    # each call asks for a picture newer than the one sent, at the configured width
    assert service.asked == [("cam", 640, None), ("cam", 640, 1), ("cam", 640, 2)]
    assert took >= 2 / 5  # three parts at 5 per second: paced, not as fast as it can
