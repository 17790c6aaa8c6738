"""``run-pipeline serve`` with ``pipeline.shards = 2``: streams placed on the shard with the
fewest, reported, previewed and measured across processes, and brought back with their
events exactly once, and their line edits, when their shard is killed."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import cv2
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import REPO, make_clip, probe_video, read_events, wait_for
from tests.e2e.serve_helpers import Events, Served, per_source_outputs, serve

SHARD_STARTED = re.compile(r"shard(\d+) \(pid (\d+)")


def frames_of(items: list[dict], source: str) -> list[dict]:
    return [item for item in items if item["event"] == "frame" and item["source_id"] == source]


def shard_pid(served: Served, index: int) -> int:
    """The pid of the shard's latest process, from the log."""
    pids = [
        int(found.group(2))
        for line in list(served.lines)
        if (found := SHARD_STARTED.search(line)) and int(found.group(1)) == index
    ]
    assert pids, f"shard {index} never started"
    return pids[-1]


def test_streams_spread_over_shards_and_come_back_when_their_shard_dies(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "small.mp4", frames=30, rate=10)
    paced = (f"cam.uri={clip}", "cam.realtime=true", "pipeline.shards=2")
    config = REPO / "configs" / "analytics.toml"
    outputs = per_source_outputs()
    with serve(tmp_path, *outputs, *paced, config=config) as served, served.client() as http:
        wait_for(lambda: http.get("/readyz").status_code == 200, 180, "both shards ready")
        events = Events(served, "?type=frame,source_down,source_up,source_removed")
        # cam is on shard 0: the first new stream goes to the empty shard 1, the next to the
        # lower index of two equal shards.
        placed = {}
        for stream_id in ("a", "b"):
            added = http.post("/api/streams", json={"id": stream_id, "uri": str(clip)})
            assert added.status_code == 201, added.text
            placed[stream_id] = added.json()["shard"]
        assert placed == {"a": 1, "b": 0}
        for stream_id in ("cam", "a", "b"):
            seen = lambda items, s=stream_id: frames_of(items, s)  # noqa: E731
            events.wait(seen, 120, f"frames of {stream_id}")
        listed = {s["id"]: s["shard"] for s in http.get("/api/streams").json()}
        assert listed == {"cam": 0, "a": 1, "b": 0}

        def det_frames() -> dict[str, float]:
            families = text_string_to_metric_families(http.get("/metrics").text)
            return {
                s.labels["shard"]: s.value
                for family in families
                for s in family.samples
                if s.name == "vapipe_stage_frames_total" and s.labels["stage"] == "det"
            }

        wait_for(lambda: set(det_frames()) == {"0", "1"} and min(det_frames().values()) > 0,
                 60, "det's frames in both shards' metrics")  # fmt: skip
        snapshot = http.get("/streams/a/snapshot.jpg")
        assert snapshot.status_code == 200, snapshot.text
        picture = cv2.imdecode(np.frombuffer(snapshot.content, np.uint8), cv2.IMREAD_COLOR)
        assert picture is not None and picture.std() > 10, "not a decoded, real picture"

        gate = {"lines": [{"name": "gate", "start": [80, 0], "end": [80, 119]}], "zones": []}
        assert http.put("/api/streams/a/analytics", json=gate).status_code == 200

        os.kill(shard_pid(served, 1), signal.SIGKILL)

        def said(kind: str, source: str) -> list[dict]:
            return [i for i in events.items if i["event"] == kind and i["source_id"] == source]

        events.wait(lambda _: said("source_down", "a"), 60, "a's source_down")
        assert "died" in said("source_down", "a")[0]["reason"]
        events.wait(lambda _: said("source_up", "a"), 180, "a's source_up after the restart")
        mark = len(frames_of(events.items, "a"))
        events.wait(lambda items: len(frames_of(items, "a")) > mark + 5, 120, "a's frames again")
        again = http.get("/api/streams/a").json()
        assert again["state"] == "running" and again["shard"] == 1
        lines = http.get("/api/streams/a/analytics").json()["lines"]
        assert [line["name"] for line in lines] == ["gate"], "the line edit was lost"
        assert not said("source_down", "cam"), "a stream of the other shard went down"

        removed = http.delete("/api/streams/b")
        assert removed.status_code == 200, removed.text
        written = read_events(tmp_path / "out" / "b.jsonl")
        assert written[-1]["event"] == "source_removed"
        assert probe_video(tmp_path / "out" / "b.mp4")["frames"] == len(frames_of(written, "b"))
        assert sorted(s["id"] for s in http.get("/api/streams").json()) == ["a", "cam"]
        events.close()
        assert served.stop() == 130
    # Every frame of the restarted stream delivered once, in order, across the restart.
    written = read_events(tmp_path / "out" / "a.jsonl")
    seqs = [item["seq"] for item in frames_of(written, "a")]
    assert seqs == list(range(len(seqs))) and len(seqs) > mark
    kinds = [item["event"] for item in written if item["event"] != "frame"]
    assert kinds[:2] == ["source_down", "source_up"]
