"""The history routes: pages of past events with media URLs, one event by id, counts per
bucket, media files with range requests and nothing outside the media folders."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.testclient import TestClient

from tests.stages.events.test_history import T0, crossing
from vapipe.pipeline import registry
from vapipe.serve.history_api import history_routes, seconds
from vapipe.serve.streams import StreamError
from vapipe.stages.events.store import EventStore


def node(type_name: str, **config: Any) -> SimpleNamespace:
    """A graph node of the registered stage type (what it declares is asked of the class)
    with just the keys given."""
    registry.load()
    return SimpleNamespace(stage_cls=registry.lookup(type_name), config=SimpleNamespace(**config))


def client(*nodes: SimpleNamespace) -> TestClient:
    async def stream_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StreamError)
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    graph = SimpleNamespace(nodes={f"n{i}": n for i, n in enumerate(nodes)})
    app = Starlette(routes=history_routes(graph),  # type: ignore[arg-type] - only .nodes is read
                    exception_handlers={StreamError: stream_error})  # fmt: skip
    return TestClient(app)


@pytest.fixture
def served(tmp_path: Path) -> TestClient:
    media = tmp_path / "media"
    (media / "snaps").mkdir(parents=True)
    (media / "snaps" / "a.jpg").write_bytes(b"\xff\xd8" + bytes(range(256)) * 4)
    (tmp_path / "secret.jpg").write_bytes(b"no")
    store = EventStore(tmp_path / "h.db")
    first = crossing(1, T0)
    first["snapshot"] = "snaps/a.jpg"
    store.add([first, crossing(2, T0 + 60, direction="out"), crossing(3, T0 + 400)])
    store.close()
    return client(node("history", path=str(tmp_path / "h.db")), node("snapshots", dir=str(media)))


def test_history_pages_and_event_by_id(served: TestClient) -> None:
    answer = served.get("/api/events/history", params={"limit": 2})
    assert answer.status_code == 200
    body = answer.json()
    assert [e["seq"] for e in body["events"]] == [3, 2]
    rest = served.get("/api/events/history", params={"limit": 2, "cursor": body["next"]}).json()
    assert [e["seq"] for e in rest["events"]] == [1] and rest["next"] is None
    assert rest["events"][0]["urls"] == {"snapshot": "/media/snaps/a.jpg"}
    one = served.get("/api/events/cam/1/line_cross/1/road").json()
    assert one["seq"] == 1 and one["urls"]["snapshot"] == "/media/snaps/a.jpg"
    assert served.get("/api/events/cam/9/line_cross/9/road").status_code == 404
    iso = "2026-11-30T00:54:20Z"  # T0 + 60
    assert [e["seq"] for e in served.get(f"/api/events/history?since={iso}").json()["events"]] == [
        3,
        2,
    ]


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("limit=0", "limit: expected 1 to 1000"),
        ("limit=abc", "limit: expected 1 to 1000"),
        ("since=yesterday", "since: expected an ISO-8601 time"),
        ("cursor=x", "cursor 'x' is not one this service gave"),
        ("limit=%C2%B2", "limit: expected 1 to 1000, got '\u00b2'"),  # '²' is a digit to str
        ("limit=" + "9" * 80, "limit: expected 1 to 1000, got '99999"),
        ("cursor=1_99999999999999999999999", "cursor '1_999999999999999999999"),  # > 64 bits
        ("cursor=1_-1", "cursor '1_-1' is not one this service gave"),
        ("cursor=nan_1", "cursor 'nan_1' is not one this service gave"),
        ("cursor=inf_1", "cursor 'inf_1' is not one this service gave"),
        ("since=1e999", "since: expected a finite time, got '1e999'"),
        ("until=nan", "until: expected a finite time, got 'nan'"),
    ],
)
def test_bad_history_queries_are_400_in_one_line(served: TestClient, query: str, said: str) -> None:
    answer = served.get(f"/api/events/history?{query}")
    assert answer.status_code == 400 and said in answer.json()["error"]


def test_counts_per_bucket(served: TestClient) -> None:
    answer = served.get("/api/counts", params={"line": "road", "bucket": "5m"}).json()
    assert answer["bucket_s"] == 300
    assert [(b["start"] - T0 // 300 * 300, b["total"]) for b in answer["buckets"]] == [
        (0, 2), (600, 1)]  # fmt: skip
    assert answer["buckets"][0]["counts"] == {"in": {"car": 1}, "out": {"car": 1}}
    assert served.get("/api/counts").status_code == 400
    assert served.get("/api/counts?line=road&bucket=5x").status_code == 400
    too_many = served.get("/api/counts", params={"line": "road", "bucket": "1s", "since": "0"})
    assert too_many.status_code == 400


def test_media_answers_ranges_and_nothing_outside_its_folders(served: TestClient) -> None:
    whole = served.get("/media/snaps/a.jpg")
    assert whole.status_code == 200 and whole.headers["content-type"] == "image/jpeg"
    assert whole.headers["accept-ranges"] == "bytes"
    part = served.get("/media/snaps/a.jpg", headers={"Range": "bytes=2-9"})
    assert part.status_code == 206
    assert part.content == bytes(range(8))
    assert part.headers["content-range"] == f"bytes 2-9/{len(whole.content)}"
    assert served.get("/media/../secret.jpg").status_code == 404
    assert served.get("/media/snaps/%2e%2e/%2e%2e/secret.jpg").status_code == 404
    assert served.get("/media/snaps/missing.jpg").status_code == 404
    for odd in ("%00.jpg", "snaps/a%00.jpg", "snaps/" + "x" * 5000 + ".jpg"):
        answer = served.get(f"/media/{odd}")
        assert answer.status_code == 404, odd  # not a 500 from the file system's refusal
        assert answer.json()["error"].startswith("no media file '"), answer.text


def test_without_a_history_node_the_routes_say_what_to_add() -> None:
    answer = client().get("/api/events/history")
    assert answer.status_code == 404
    assert "add a [nodes.history] node" in answer.json()["error"]


def test_durations() -> None:
    assert seconds("5m", "b") == 300 and seconds("90", "b") == 90 and seconds("1.5h", "b") == 5400
    assert seconds("1d", "b") == 86400
    with pytest.raises(StreamError):
        seconds("0s", "b")
