"""The HTTP layer alone, over a stand-in for the service: a handler that fails answers 500
with one line and the service keeps answering; the token and the body limit hold on every
path they guard."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from starlette.testclient import TestClient

from vapipe.pipeline.config import ServeSettings
from vapipe.pipeline.event_hub import EventHub
from vapipe.pipeline.http_api import MAX_BODY, json_body, make_app
from vapipe.pipeline.service import StreamError

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
    client = TestClient(make_app(service))  # type: ignore[arg-type]
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
    client = TestClient(make_app(service, token="s3cret-token"))  # type: ignore[arg-type]
    assert client.get("/healthz").status_code == 200
    assert client.get("/").status_code == 200, "the page itself holds no data"
    assert client.get("/api/streams").status_code == 401
    wrong = {"Authorization": "Bearer s3cret-tokenx"}
    assert client.get("/api/streams", headers=wrong).status_code == 401
    good = {"Authorization": "Bearer s3cret-token"}
    assert client.get("/api/streams", headers=good).status_code == 200
    big = client.post("/api/streams", headers=good, content=b"[" + b"0," * (600 << 10) + b"0]")
    assert big.status_code == 413 and service.added == []
    added = client.post("/api/streams", headers=good, json={"id": "b", "uri": "x"})
    assert added.status_code == 201 and service.added == [{"id": "b", "uri": "x"}]


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
    client = TestClient(make_app(service))  # type: ignore[arg-type]

    def chunks():  # no Content-Length: httpx sends it chunked
        for _ in range(40):
            yield b" " * (32 << 10)

    refused = client.post("/api/streams", content=chunks())
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
    client = TestClient(make_app(service, token="t0ken-t0ken"))  # type: ignore[arg-type]
    service.fail_with = AssertionError(f"{method} {path} reached the service")
    refused = client.request(method, path)
    assert refused.status_code == 401, (method, path, refused.status_code)
    assert (
        client.request(method, path, headers={"Authorization": "Bearer t0ken-t0ke"}).status_code
        == 401
    )
