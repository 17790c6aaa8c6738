"""Nodes on tracked objects give the same results however frames fall into their batches:
each graph runs twice, once a frame at a time (``max_batch = 1``) and once in batches as large
as the node takes (``max_batch = 16`` and a long ``batch_timeout_ms``), and every detection's
attributes are compared: the same labels and names on the same frames, similarities and
vectors within 1e-5 (a model's arithmetic may differ in the last bits with the batch size)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import av
import cv2
import pytest

from tests.e2e.helpers import cli
from tests.object_models import brightness_classifier
from vapipe.pipeline.assets import resolve_media

DETECT = """\
links = ["cam ! pre ! det ! nms ! track ! {node} ! events"]
[nodes.cam]
type = "source"
uri = "{uri}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
conf = 0.3
classes = {classes}
[nodes.track]
type = "track"
[nodes.events]
type = "events"
path = "out/events.jsonl"
{table}
"""
BATCHED = {"one at a time": "max_batch = 1\nbatch_timeout_ms = 0\n",
           "batched": "max_batch = 16\nbatch_timeout_ms = 400\n"}  # fmt: skip


def run(tmp_path: Path, name: str, text: str, frames: int) -> list[dict[str, Any]]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "graph.toml").write_text(text)
    result = cli(str(folder / "graph.toml"), "--no-progress", "--max-frames", str(frames),
                 "--stats", "stats.json", cwd=folder)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    lines = (folder / "out" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"event":"frame"' in line]


def attributes(frames: list[dict[str, Any]], node: str) -> dict[tuple[int, int], dict]:
    """(frame, track) -> the node's result shown on that frame."""
    return {
        (frame["seq"], d["track_id"]): d["attributes"][node]
        for frame in frames
        for d in frame["detections"]
        if node in d.get("attributes", {})
    }


def same(a: dict[tuple[int, int], dict], b: dict[tuple[int, int], dict]) -> None:
    assert a.keys() == b.keys(), f"results on other frames: {sorted(a.keys() ^ b.keys())[:5]}"
    for where, one in a.items():
        other = b[where]
        assert one.keys() == other.keys(), where
        for key, value in one.items():
            if isinstance(value, float):
                assert value == pytest.approx(other[key], abs=1e-5), (where, key)
            elif key == "vector":
                assert value == pytest.approx(other[key], abs=1e-5), where
            else:
                assert value == other[key], (where, key)


def gallery_from_the_clip(tmp_path: Path, frames: list[dict[str, Any]]) -> Path:
    """Three people cut from frame 30 of the clip (the largest boxes there), one folder each."""
    at = next(frame for frame in frames if frame["seq"] == 30)
    people = sorted(at["detections"], key=lambda d: -(d["xyxy"][2] - d["xyxy"][0]))[:3]
    with av.open(resolve_media("sample:people")) as container:
        image = next(f for i, f in enumerate(container.decode(video=0)) if i == 30)
        picture = image.to_ndarray(format="bgr24")
    gallery = tmp_path / "gallery"
    for name, person in zip(("ana", "ben", "cleo"), people, strict=True):
        x1, y1, x2, y2 = (round(v) for v in person["xyxy"])
        (gallery / name).mkdir(parents=True)
        cv2.imwrite(str(gallery / name / "1.png"), picture[y1:y2, x1:x2])
    return gallery


def test_names_from_a_gallery_are_the_same_whatever_the_batching(tmp_path: Path) -> None:
    table = """[nodes.who]
type = "embed"
model = "person-reid"
fit = "stretch"
on_classes = ["person"]
vector = true
{gallery}{batching}"""
    first = run(tmp_path, "plain", DETECT.format(
        node="who", uri="sample:people", classes="[0]",
        table=table.format(gallery="", batching=BATCHED["batched"])), 40)  # fmt: skip
    gallery = gallery_from_the_clip(tmp_path, first)
    runs = {
        name: attributes(run(tmp_path, name.replace(" ", "_"), DETECT.format(
            node="who", uri="sample:people", classes="[0]",
            table=table.format(gallery=f'gallery = "{gallery}"\nmatch = 0.8\n', batching=rows),
        ), 120), "who")
        for name, rows in BATCHED.items()
    }  # fmt: skip
    one, batched = runs["one at a time"], runs["batched"]
    same(one, batched)
    assert {v["name"] for v in one.values()} >= {"ana", "ben"}, "the gallery named nobody"


def test_labels_are_the_same_whatever_the_batching(tmp_path: Path) -> None:
    model = brightness_classifier(tmp_path / "brightness.onnx")
    table = f"""[nodes.kind]
type = "classify"
model = "{model}"
on_classes = ["car"]
attempts = 3
min_attempts = 2
retry_s = 0.1
reinfer_s = 1.0
{{batching}}"""
    runs = {
        name: attributes(run(tmp_path, name.replace(" ", "_"), DETECT.format(
            node="kind", uri="sample:traffic", classes="[2]",
            table=table.format(batching=rows)), 150), "kind")
        for name, rows in BATCHED.items()
    }  # fmt: skip
    same(runs["one at a time"], runs["batched"])
    assert len(runs["batched"]) > 50 and {v["label"] for v in runs["batched"].values()} <= {
        "light",
        "dark",
    }
