"""The parent's ledger of a sharded run with two event sinks (events and MQTT): each sink's
deliveries counted on their own, a restarted shard resuming where the slower sink stopped,
and each sink told of a source going down and up, in its place after the last frame."""

from __future__ import annotations

from vapipe.pipeline.config import parse
from vapipe.pipeline.graph import build
from vapipe.shards.ledger import Ledger

TWO_SINKS = """\
links = ["a ! pre", "b ! pre", "pre ! det ! nms ! events", "nms ! mq"]
[nodes.a]
type = "source"
uri = "rtsp://viewer:pw-ledger@cam/a"
[nodes.b]
type = "source"
uri = "b.mp4"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "m.onnx"
[nodes.nms]
type = "nms"
[nodes.events]
type = "events"
path = "out/events.jsonl"
[nodes.mq]
type = "mqtt"
host = "127.0.0.1"
"""


def ledger() -> Ledger:
    return Ledger(build(parse(TWO_SINKS, "two.toml")), ("events", "mq"))


def test_each_sink_is_tracked_and_a_restart_resumes_at_the_slower_one() -> None:
    book = ledger()
    assert sorted(book.sources) == ["a", "b"]
    assert book.sources["a"].sinks == ["events", "mq"] and "pw-ledger" not in book.sources["a"].uri
    for seq in range(5):
        book.delivered("a", "events", seq, seq / 10, 100.0 + seq)
    for seq in range(3):
        book.delivered("a", "mq", seq, seq / 10, 100.0 + seq)
    assert book.progress() == 5, "progress is the furthest sink's"
    assert book.resume({"a", "b"}) == {"a": (3, 0.4, 104.0)}, "resume where mq stopped"
    # The restarted shard sends frames 3 and 4 again: new to mq only.
    assert book.admit("a", "events", 3) == (False, None)
    assert book.admit("a", "mq", 3) == (True, None)
    assert book.admit("a", "events", 5) == (True, None)


def test_a_source_down_and_up_is_one_record_each_placed_after_its_last_frame() -> None:
    book = ledger()
    book.delivered("a", "events", 0, 0.0, 50.0)
    book.delivered("a", "mq", 0, 0.0, 50.0)
    book.delivered("a", "events", 1, 0.04, 50.04)
    ((source, down),) = book.went_down({"a"}, attempt=1, reason="shard 0 died")
    assert source.sinks == ["events", "mq"]
    assert (down["event"], down["seq"], down["pts"], down["attempt"]) == ("source_down", 0, 0.04, 1)
    assert down["reason"] == "shard 0 died" and down["uri"] == "rtsp://***@cam/a"
    assert book.went_down({"b"}, attempt=1, reason="x")[0][1]["seq"] is None, "b had no frame"
    again = book.went_down({"a"}, attempt=2, reason="again")
    assert again[0][1]["attempt"] == 2
    new, up = book.admit("a", "mq", 1)
    assert new and up is not None and (up["event"], up["attempt"]) == ("source_up", 2)
    assert up["down_s"] >= 0
    assert book.admit("a", "events", 2) == (True, None), "source_up told twice"


def test_an_older_frame_never_moves_the_resume_time_back() -> None:
    book = ledger()
    book.delivered("b", "events", 7, 2.0, 200.0)
    book.delivered("b", "mq", 6, 1.9, 199.9)  # the slower sink's earlier frame
    assert book.resume({"b"}) == {"b": (7, 2.0, 200.0)}
    book.track("b", "b", "b2.mp4", like="b")  # a service's new stream with the same id
    assert book.resume({"b"}) == {} and book.sources["b"].uri == "b2.mp4"
    book.forget("b")
    assert "b" not in book.sources and book.progress() == 0


def test_admission_is_by_each_sinks_next_frame(monkeypatch) -> None:
    book = ledger()
    assert book.admit("b", "events", 0) == (True, None), "a sink that had nothing takes frame 0"
    book.delivered("b", "events", 1, 0.04, 10.0)
    assert book.admit("b", "events", 1) == (False, None) and book.admit("b", "events", 2)[0]
    assert book.admit("b", "events", 9) == (True, None), "frames after a gap are new"
    book.delivered("b", "mq", 7, 0.28, 10.2)
    assert book.resume({"b"}) == {"b": (2, 0.28, 10.2)}
    book.delivered("b", "events", 3, 0.28, 10.3)  # the same pts, captured later
    assert book.resume({"b"}) == {"b": (4, 0.28, 10.3)}
    book.delivered("b", "mq", 8, 0.32, 10.4)
    ((_, down),) = book.went_down({"b"}, attempt=1, reason="x")
    assert down["seq"] == 3, "placed after the slower sink's last frame"
    now = [40.0]
    monkeypatch.setattr("vapipe.shards.ledger.time.monotonic", lambda: now[0])
    book.went_down({"a"}, attempt=3, reason="y")
    now[0] = 103.12345
    _, up = book.admit("a", "events", 0)
    assert up is not None and up["down_s"] == 63.123 and up["attempt"] == 3
