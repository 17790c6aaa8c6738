"""configs/service.toml run over the traffic clip as a file: every crossing gets a snapshot of
its car, a clip copied from the clip's own packets that holds the crossing's very frame, and a
row in the history, whose counts per bucket are the events sink's counts."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from tests.conftest import asset
from tests.e2e.helpers import REPO, cli, read_events, read_lines, spawn, wait_for
from tests.e2e.rtsp import rtsp_server
from vapipe.stages.events.store import EventStore, records_in

SERVICE = REPO / "configs" / "service.toml"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("service")
    result = cli(str(SERVICE), "--set", "cam.loop=false", "--set", "cam.realtime=false", cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def events_of(run: Path) -> list[dict]:  # type: ignore[type-arg]
    return read_events(run / "out" / "cam.jsonl")


def source_frames() -> list[np.ndarray]:
    with av.open(str(asset("media", "traffic.mp4"))) as container:
        return [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]


def iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union


def test_every_crossing_has_a_snapshot_of_its_car(run: Path) -> None:
    events = events_of(run)
    frames = {e["seq"]: e for e in events if e["event"] == "frame"}
    crossings = [e for e in events if e["event"] == "line_cross"]
    assert len(crossings) >= 20
    media = run / "out" / "media"
    for event in crossings:
        picture = cv2.imread(str(media / event["snapshot"]))
        crop = cv2.imread(str(media / event["snapshot_crop"]))
        assert picture.shape == (360, 640, 3)
        assert min(crop.shape[:2]) >= 160
        # the pictured box is the track's own box in the pictured frame, within the last second
        shown = frames[event["snapshot_seq"]]["detections"]
        box = next(d["xyxy"] for d in shown if d["track_id"] == event["track_id"])
        assert box == event["snapshot_box"]
        assert 0 <= event["seq"] - event["snapshot_seq"] <= 24
        # and it overlaps where the track was when it crossed
        at_event = frames[event["seq"]]["detections"]
        crossed = next(d["xyxy"] for d in at_event if d["track_id"] == event["track_id"])
        assert iou(box, crossed) > 0, event["id"]


def test_every_crossing_has_a_clip_holding_its_frame_unchanged(run: Path) -> None:
    events = [e for e in events_of(run) if e["event"] == "line_cross"]
    source = source_frames()
    media = run / "out" / "media"
    clips = {e["clip"] for e in events}
    assert len(clips) < len(events)  # crossings close together share a clip
    opened_by: dict[str, str] = {}
    for event in events:
        opened_by.setdefault(event["clip"], event["id"])
    clips_decoded: dict[str, list[tuple[float, np.ndarray]]] = {}
    for event in events:
        if event["clip"] not in clips_decoded:
            with av.open(str(media / event["clip"])) as container:
                clips_decoded[event["clip"]] = [
                    (f.time, f.to_ndarray(format="bgr24")) for f in container.decode(video=0)
                ]
        decoded = clips_decoded[event["clip"]]
        first = decoded[0][0]
        span = decoded[-1][0] - first
        # pre_s + post_s = 6 s at least where the source had them (the clip is 20 s long),
        # started at most one GOP (250 frames here) before pre_s
        wanted = min(event["pts"], 3.0) + min(19.9 - event["pts"], 3.0) - 0.1
        assert span >= wanted, (event["id"], span)
        if event["id"] == opened_by[event["clip"]]:  # later events extend a clip
            assert event["clip_at_s"] <= 3.0 + 250 / 23.976 + 0.05
        at = min(decoded, key=lambda item: abs(item[0] - first - event["clip_at_s"]))
        assert abs(at[0] - first - event["clip_at_s"]) < 0.01
        # copied, not re-encoded: the very pixels the source decodes to at that frame
        assert np.array_equal(at[1], source[event["seq"]]), event["id"]


def test_the_history_holds_every_event_and_counts_as_the_events_sink(run: Path) -> None:
    events = events_of(run)
    kept = list(records_in(run / "out" / "events.db"))
    assert kept == [e for e in events if e["event"] != "frame"]
    store = EventStore(run / "out" / "events.db", readonly=True)
    buckets = store.counts("road", 300)
    totals: dict[str, int] = {}
    for bucket in buckets:
        for direction, classes in bucket["counts"].items():
            totals[direction] = totals.get(direction, 0) + sum(classes.values())
    final = [e for e in events if e["event"] == "frame"][-1]["analytics"]["lines"]["road"]
    assert totals == {k: v for k, v in final.items() if k != "by_class" and v}
    assert sum(totals.values()) == len([e for e in events if e["event"] == "line_cross"])
    assert (run / "out" / "media" / ".clips.written").is_file()


def test_a_camera_that_goes_down_has_its_last_clip_written_at_once(tmp_path: Path) -> None:
    """The camera dies within its last crossing's post-roll and never comes back: the clip is
    written then, with what was sent, not when the run or the stream ends."""
    events_path = tmp_path / "out" / "cam.jsonl"

    def first_clip() -> dict | None:  # type: ignore[type-arg]
        for line in read_lines(events_path):
            event = json.loads(line)
            if event["event"] == "line_cross" and "clip" in event:
                return event
        return None

    with rtsp_server(asset("media", "traffic.mp4")) as server:
        run = spawn(str(SERVICE), "--set", f"cam.uri={server.url}", "--set",
                    "cam.reconnect.initial_s=0.5", "--set", "cam.reconnect.max_s=1",
                    cwd=tmp_path)  # fmt: skip
        wait_for(lambda: first_clip() is not None, 120, "a crossing with a clip")
        server.kill()  # within the clip's 3 s of post-roll
    event = first_clip()
    assert event is not None
    clip = tmp_path / "out" / "media" / event["clip"]
    wait_for(lambda: '"source_down"' in events_path.read_text(), 30, "source_down")
    wait_for(clip.exists, 60, "the clip, with the camera still down and the run going")
    assert run.poll() is None
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130, stderr[-2000:]
    with av.open(str(clip)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames > 0
