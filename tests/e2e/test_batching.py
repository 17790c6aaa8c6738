"""Batched inference end to end: same detections as frame by frame, across several streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import FILE_CONFIG, cli, read_events

TWO_SOURCES = """\
links = ["people ! pre", "horses ! pre", "pre ! det ! nms ! events"]

[nodes.people]
type = "source"
uri = "sample:people"

[nodes.horses]
type = "source"
uri = "sample:horses"

[nodes.pre]
type = "preprocess"

[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 8
batch_timeout_ms = 50

[nodes.nms]
type = "nms"

[nodes.events]
type = "events"
path = "events.jsonl"
"""


def detections_by_frame(path: Path) -> dict[tuple[str, int], list[dict]]:
    return {(e["source_id"], e["seq"]): e["detections"] for e in read_events(path)}


def assert_same_detections(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        first, second = a[key], b[key]
        assert len(first) == len(second), key
        for x, y in zip(first, second, strict=True):
            assert x["class_id"] == y["class_id"], key
            assert x["score"] == pytest.approx(y["score"], abs=2e-3), key
            assert x["xyxy"] == pytest.approx(y["xyxy"], abs=0.1), key


@pytest.mark.parametrize("model", ["yolox-nano", "yolov8n"])
def test_max_batch_8_equals_max_batch_1(tmp_path: Path, model: str) -> None:
    runs = {}
    for batch in (1, 8):
        out = tmp_path / f"b{batch}.jsonl"
        result = cli(
            str(FILE_CONFIG),
            "--max-frames",
            "24",
            "--set",
            f"det.model={model}",
            "--set",
            f"det.max_batch={batch}",
            "--set",
            "det.batch_timeout_ms=600000",  # batches fill completely: only EOS ends the last
            "--set",
            f"events.path={out}",
            "--set",
            f"video.path={tmp_path}/b{batch}.mp4",
            "--stats",
            str(tmp_path / f"b{batch}.json"),
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        runs[batch] = detections_by_frame(out)
    assert len(runs[1]) == 24 and sum(map(len, runs[1].values())) > 24
    assert_same_detections(runs[1], runs[8])
    det = json.loads((tmp_path / "b8.json").read_text())["stages"]["det"]
    assert det["batch_mode"] == "dynamic (rewritten)"
    assert (det["frames"], det["calls"]) == (24, 3), f"batches of 8 did not form: {det}"


def test_cross_stream_batches_do_not_stall_when_one_source_ends(tmp_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(TWO_SOURCES)
    result = cli(str(config), "--max-frames", "60", "--stats", "stats.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "events.jsonl")
    for source, count in (("people", 60), ("horses", 60)):
        seqs = [e["seq"] for e in events if e["source_id"] == source]
        assert seqs == list(range(count)), f"{source}: frames lost or out of order"
    det = json.loads((tmp_path / "stats.json").read_text())["stages"]["det"]
    assert det["frames"] == 120 and det["calls"] < 120 / 2, f"frames were not batched: {det}"
    short = cli(str(config), "--set", "horses.uri=sample:dog", "--max-frames", "40", cwd=tmp_path)
    assert short.returncode == 0, short.stderr[-2000:]
    events = read_events(tmp_path / "events.jsonl")
    assert [e["seq"] for e in events if e["source_id"] == "horses"] == [0]
    assert [e["seq"] for e in events if e["source_id"] == "people"] == list(range(40))
