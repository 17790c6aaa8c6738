"""Edges of the history routes: every filter reaches the query, the limits are where the
docs say, a history that cannot be read is 503 (and never created by a reader), and the node
is found whatever comes before it in the graph."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.serve.test_history_api import client, node
from tests.stages.events.test_history import T0, crossing, entered
from vapipe.stages.events.store import EventStore


@pytest.fixture
def served(tmp_path: Path) -> TestClient:
    store = EventStore(tmp_path / "h.db")
    store.add([
        crossing(1, T0), crossing(2, T0 + 1, line="gate"), crossing(3, T0 + 2, source="b"),
        entered(4, T0 + 3), entered(5, T0 + 4, zone="door"),
    ])  # fmt: skip
    store.close()
    # a node whose type sorts after "history" comes first: the history node is still found
    return client(node("video", path=str(tmp_path / "v.mp4")),
                  node("history", path=str(tmp_path / "h.db")))  # fmt: skip


@pytest.mark.parametrize(
    ("query", "seqs"),
    [("type=zone_enter", [5, 4]), ("line=gate", [2]), ("zone=door", [5]), ("source=b", [3]),
     ("", [5, 4, 3, 2, 1])],
)  # fmt: skip
def test_every_filter_reaches_the_query(served: TestClient, query: str, seqs: list[int]) -> None:
    events = served.get(f"/api/events/history?{query}").json()["events"]
    assert [e["seq"] for e in events] == seqs


def test_counts_take_the_source(served: TestClient) -> None:
    assert served.get("/api/counts?line=road&source=b").json()["buckets"][0]["total"] == 1
    assert served.get("/api/counts?line=road").json()["buckets"][0]["total"] == 2


def test_limits_are_inclusive(served: TestClient) -> None:
    assert served.get("/api/events/history?limit=1000").status_code == 200
    assert served.get("/api/events/history?limit=1001").status_code == 400
    assert served.get("/api/events/history?limit=1").json()["next"] is not None
    assert served.get("/api/events/history?since=").status_code == 200  # empty: no filter
    minute = 60
    start = T0 - 20_000 * minute
    for span, status in ((10_000, 200), (10_000.5, 400), (10_001, 400)):
        until = start + span * minute
        answer = served.get(f"/api/counts?line=road&bucket=1m&since={start}&until={until}")
        assert answer.status_code == status, span


def test_a_history_that_cannot_be_read_is_503_and_a_reader_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "none.db"
    answer = client(node("history", path=str(missing))).get("/api/events/history")
    assert answer.status_code == 503 and "cannot be read" in answer.json()["error"]
    assert not missing.exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    answer = client(node("history", path=str(garbage))).get("/api/events/history")
    assert answer.status_code == 503 and "cannot be read" in answer.json()["error"]
