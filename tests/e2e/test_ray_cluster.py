"""``pipeline.cluster = "ray"`` end to end, on Ray's own multi-node test cluster (three nodes
of this machine, each with its raylet): real media through the real pipeline, the shards Ray
actors placed by Ray's scheduler, the events merged in the driver."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import cli, probe_video, read_events, wait_for
from tests.e2e.ray_cluster import on, ray_cluster, worker_nodes
from tests.e2e.test_shards import THREE_SOURCES, Running, frames_by_source, same_detections

SOURCES = {"people": "people", "traffic": "traffic", "horses": "horses",
           "people2": "people", "traffic2": "traffic", "horses2": "horses"}  # fmt: skip

CONFIG = """\
links = [{links}, "pre ! det ! nms ! track ! video", "track ! events"]

[pipeline]
shards = 3

[pipeline.shard_resources]
num_cpus = 1

{sources}
""" + THREE_SOURCES[THREE_SOURCES.index("[nodes.pre]") :]  # the same detector, tracker, sinks


DRIVER_ENV = {**os.environ, "CLIP6": "sample:horses"}


def write_config(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    # One clip named through the environment: the shards on other nodes must expand the config
    # with the driver's values, not their own (the nodes here never had this variable).
    uris = {name: f"sample:{clip}" for name, clip in SOURCES.items()} | {"horses2": "${CLIP6}"}
    sources = "".join(
        f'[nodes.{name}]\ntype = "source"\nuri = "{uri}"\n\n' for name, uri in uris.items()
    )
    links = ", ".join(f'"{name} ! pre"' for name in SOURCES)
    path = folder / "cluster.toml"
    path.write_text(CONFIG.format(links=links, sources=sources))
    return path


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A head and two more nodes, 2 CPUs each (as Ray counts them): room for a shard that
    moves when its node is lost."""
    with ray_cluster(head_cpus=2, workers=2) as made:
        yield made


def test_six_files_over_three_nodes_give_the_events_of_one_process(
    tmp_path: Path, cluster: Any
) -> None:
    frames = 24
    runs = {}
    for name, extra in (("one", ("--set", "pipeline.shards=1")), ("ray", on(cluster))):
        folder = tmp_path / name
        config = write_config(folder)
        result = cli(str(config), "--max-frames", str(frames), "--stats", "stats.json", *extra,
                     cwd=folder, env=DRIVER_ENV)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = frames_by_source(read_events(folder / "out" / "events.jsonl"))
    one, ray = runs["one"], runs["ray"]
    assert sorted(one) == sorted(ray) == sorted(SOURCES)
    for source in SOURCES:
        assert [e["seq"] for e in ray[source]] == list(range(frames)), source
    same_detections(one, ray)
    stats = json.loads((tmp_path / "ray" / "stats.json").read_text())
    assert stats["cluster"]["kind"] == "ray" and stats["cluster"]["nodes"] == 3
    shards = stats["shards"]
    # Round robin in config order, each shard an actor on a node of its own (spread).
    assert [s["sources"] for s in shards] == [
        ["people", "people2"], ["traffic", "traffic2"], ["horses", "horses2"],
    ]  # fmt: skip
    assert len({s["node"] for s in shards}) == 3
    assert stats["stages"]["det"]["frames"] == 6 * frames
    # Each shard wrote its sources' videos where it ran: the driver's folder, on this machine.
    for source in SOURCES:
        assert probe_video(tmp_path / "ray" / "out" / f"{source}.mp4")["frames"] == frames


def test_a_lost_node_s_sources_go_on_elsewhere_and_every_frame_arrives_once(
    tmp_path: Path, cluster: Any
) -> None:
    frames = 96
    config = write_config(tmp_path)
    events = tmp_path / "out" / "events.jsonl"
    run = Running(config, "--max-frames", str(frames), "--stats", "stats.json", *on(cluster),
                  env=DRIVER_ENV)  # fmt: skip
    placed = re.compile(r"shard(\d) \(ray node \S+ \(([0-9a-f]{8})\)")
    wait_for(lambda: len({m[0] for m in map(placed.search, run.lines) if m}) == 3, 180,
             "three shards placed")  # fmt: skip
    workers = worker_nodes(cluster)
    shard, node_id = next(
        (m[1], m[2]) for m in map(placed.search, run.lines) if m and m[2] in workers
    )
    lost = [name for i, name in enumerate(SOURCES) if i % 3 == int(shard)]

    def delivered(source: str) -> int:
        text = events.read_text() if events.exists() else ""
        return text.count(f'"event":"frame","source_id":"{source}"')

    wait_for(lambda: delivered(lost[0]) >= 8, 180, "frames from the shard on that node")
    assert delivered(lost[0]) < frames, "the run ended before the node could be lost"
    cluster.remove_node(workers[node_id])
    assert run.finish(300) == 0, "\n".join(run.lines[-40:])

    records = read_events(events)
    by_source = frames_by_source(records)
    for source in SOURCES:  # every frame once, in order, whichever shard sent it
        assert [e["seq"] for e in by_source[source]] == list(range(frames)), source
    for source in lost:
        kinds = [(r["event"], r.get("reason", "")) for r in records if r["source_id"] == source]
        down = next(i for i, (kind, _) in enumerate(kinds) if kind == "source_down")
        assert "node lost" in kinds[down][1], kinds[down]
        assert kinds[down + 1][0] == "source_up", kinds[down : down + 2]
    others = [name for name in SOURCES if name not in lost]
    assert not [r for r in records if r["source_id"] in others and r["event"] == "source_down"]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert [s["restarts"] for s in stats["shards"]] == [int(i == int(shard)) for i in range(3)]
    assert workers[node_id] not in cluster.worker_nodes


def test_an_address_nothing_answers_is_one_line_naming_it(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = cli(str(config), "--set", "pipeline.cluster='ray'",
                 "--set", "pipeline.ray_address='ray://user:secret@127.0.0.1:1'",
                 cwd=tmp_path, env=DRIVER_ENV)  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "cluster.toml" in lines[-1]
    assert "cannot reach the Ray cluster at ray://***@127.0.0.1:1" in lines[-1]
    assert "secret" not in result.stderr


def test_a_camera_on_a_lost_node_moves_reconnects_and_keeps_its_time(tmp_path: Path) -> None:
    from tests.conftest import asset
    from tests.e2e.rtsp import rtsp_server
    from tests.e2e.test_timeline import CAMERAS_IN_SHARDS, RATE, assert_real_time, frames

    events_path = tmp_path / "events.jsonl"

    def count(source: str) -> int:
        text = events_path.read_text() if events_path.exists() else ""
        return text.count(f'"event":"frame","source_id":"{source}"')

    # Shards only on the two workers (one each), so that the lost one's camera has somewhere
    # to go.
    with (
        ray_cluster(head_cpus=0, workers=2) as cluster,
        rtsp_server(asset("media", "people.mp4")) as server,
    ):
        config = tmp_path / "cams.toml"
        config.write_text(CAMERAS_IN_SHARDS.format(url=server.url))
        run = Running(config, *on(cluster))
        wait_for(lambda: count("b") >= 48, 180, "two seconds of camera b")
        placed = re.compile(r"shard1 \(ray node \S+ \(([0-9a-f]{8})\)")
        node = next(m[1] for m in map(placed.search, run.lines) if m)
        cluster.remove_node(worker_nodes(cluster)[node])  # shard1 has b
        wait_for(lambda: '"source_up"' in events_path.read_text(), 180, "b back elsewhere")
        restarted = count("b")
        wait_for(lambda: count("b") >= restarted + 96, 120, "four seconds after it moved")
        run.process.send_signal(2)
        assert run.finish(120) == 130, "\n".join(run.lines[-30:])
    events = read_events(events_path)
    # The shard's down, not one of the camera's own: on a loaded machine the RTSP stream can
    # stall past the source's 5 s watchdog too ("no frame for 5.0 s").
    downs = [e for e in events if e["event"] == "source_down" and e["source_id"] == "b"]
    by_shard = [e for e in downs if "shard" in e["reason"]]
    assert by_shard and "node lost" in by_shard[0]["reason"], downs
    seen = frames(events, "b")
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(set(seqs)), "seq went back after the move"
    assert_real_time(seen, 1 / RATE)  # its time spans the outage, neither squeezed nor stretched
    # Camera a's shard was never touched (its clip may end on a slow machine: a down of its
    # own, from its source, not from a shard).
    shards_down = [e for e in events if e["event"] == "source_down" and "shard" in e["reason"]]
    assert [e["source_id"] for e in shards_down] == ["b"], shards_down
