"""``run-pipeline serve`` with ``pipeline.cluster = "ray"``: streams added over HTTP run on the
cluster's nodes, ``/metrics`` names the node of every shard, and a stream whose node is lost
comes back on another with its line edit and every frame once."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import REPO, make_clip, read_events, wait_for
from tests.e2e.ray_cluster import on, ray_cluster, worker_nodes
from tests.e2e.serve_helpers import Events, per_source_outputs, serve
from tests.e2e.test_serve_shards import frames_of

PLACED = re.compile(r"shard(\d) \(ray node (\S+ \(([0-9a-f]{8})\))")


def test_a_served_stream_on_a_lost_node_comes_back_on_another(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "small.mp4", frames=30, rate=10)
    paced = (f"cam.uri={clip}", "cam.realtime=true", "pipeline.shards=2")
    # No CPUs on the head for shards: both go to the two workers, one each (spread), and the
    # one left takes the other's shard when its node is lost.
    with ray_cluster(head_cpus=0, workers=2) as cluster:
        settings = [a for a in on(cluster) if a != "--set"]
        config = REPO / "configs" / "analytics.toml"
        outputs = per_source_outputs()
        with (
            serve(tmp_path, *outputs, *paced, *settings, config=config) as served,
            served.client() as http,
        ):
            wait_for(lambda: http.get("/readyz").status_code == 200, 240, "both shards ready")
            events = Events(served, "?type=frame,source_down,source_up,source_removed")
            added = http.post("/api/streams", json={"id": "a", "uri": str(clip)})
            assert added.status_code == 201, added.text
            assert added.json()["shard"] == 1  # cam is on shard 0
            for stream_id in ("cam", "a"):
                seen = lambda items, s=stream_id: frames_of(items, s)  # noqa: E731
                events.wait(seen, 120, f"frames of {stream_id}")
            placed = {int(m[1]): (m[2], m[3]) for m in map(PLACED.search, served.lines) if m}
            assert len({node for node, _ in placed.values()}) == 2, placed

            def det_nodes() -> dict[str, str]:
                families = text_string_to_metric_families(http.get("/metrics").text)
                return {
                    s.labels["shard"]: s.labels["node"]
                    for family in families
                    for s in family.samples
                    if s.name == "vapipe_stage_frames_total" and s.labels["stage"] == "det"
                }

            wait_for(lambda: len(det_nodes()) == 2, 60, "both shards in the metrics")
            assert det_nodes() == {str(i): node for i, (node, _) in placed.items()}

            gate = {"lines": [{"name": "gate", "start": [80, 0], "end": [80, 119]}], "zones": []}
            assert http.put("/api/streams/a/analytics", json=gate).status_code == 200
            cluster.remove_node(worker_nodes(cluster)[placed[1][1]])

            def said(kind: str) -> list[dict]:
                return [i for i in events.items if i["event"] == kind and i["source_id"] == "a"]

            events.wait(lambda _: said("source_down"), 120, "a's source_down")
            assert "node lost" in said("source_down")[0]["reason"]
            events.wait(lambda _: said("source_up"), 240, "a's source_up on the other node")
            mark = len(frames_of(events.items, "a"))
            events.wait(lambda items: len(frames_of(items, "a")) > mark + 5, 120, "a again")
            again = http.get("/api/streams/a").json()
            assert again["state"] == "running" and again["shard"] == 1
            lines = http.get("/api/streams/a/analytics").json()["lines"]
            assert [line["name"] for line in lines] == ["gate"], "the line edit was lost"
            removed = http.delete("/api/streams/a")
            assert removed.status_code == 200, removed.text
            events.close()
            assert served.stop() == 130
    written = read_events(tmp_path / "out" / "a.jsonl")
    seqs = [item["seq"] for item in frames_of(written, "a")]
    assert seqs == list(range(len(seqs))) and len(seqs) > mark  # each frame once, in order
    assert written[-1]["event"] == "source_removed"
