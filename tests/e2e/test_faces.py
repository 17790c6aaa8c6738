"""Faces through the real pipeline (configs/faces.toml) on footage with exact truth: people
of people.mp4 pasted on a plain background, two of them in the gallery, one a stranger."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.e2e.faces_footage import Walker, make_faces_footage
from tests.e2e.helpers import REPO, cli, read_events
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.boxes import iou_matrix
from vapipe.stages.objects.config import DetectInsideConfig, EmbedConfig
from vapipe.stages.objects.detect_inside import DetectInsideStage
from vapipe.stages.objects.embed import EmbedStage

FACES = REPO / "configs" / "faces.toml"


@pytest.fixture(scope="module")
def footage(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Walker]]:
    return make_faces_footage(tmp_path_factory.mktemp("faces"))


@pytest.fixture(scope="module")
def faces_run(
    footage: tuple[Path, Path, list[Walker]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    clip, gallery, _ = footage
    folder = tmp_path_factory.mktemp("run")
    result = cli(
        str(FACES), "--set", f"cam.uri={clip}", "--set", f"faceid.gallery={gallery}",
        "--stats", "stats.json", "--no-progress", cwd=folder,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads((folder / "stats.json").read_text())
    return read_events(folder / "out" / "faces.jsonl"), stats


def whose(detections: list[dict[str, Any]], walker: Walker, seq: int) -> dict[str, Any]:
    """The detection that is this walker (the best overlap with its pasted picture)."""
    boxes = np.array([d["xyxy"] for d in detections], np.float32)
    overlap = iou_matrix(np.array([walker.box(seq)], np.float32), boxes)[0]
    return detections[int(overlap.argmax())]


def test_names_are_right_and_the_stranger_stays_unknown(
    footage: tuple[Path, Path, list[Walker]], faces_run: tuple[list[dict[str, Any]], dict[str, Any]]
) -> None:
    _, _, walkers = footage
    events, stats = faces_run
    frames = [e for e in events if e["event"] == "frame"]
    named_late = 0
    for event in frames:
        for walker in walkers:
            found = whose(event["detections"], walker, event["seq"])
            name = found.get("attributes", {}).get("faceid", {}).get("name")
            if walker.name == "unknown":
                assert name in (None, "unknown"), (event["seq"], found)
            elif event["seq"] >= len(frames) // 2:
                assert name == walker.name, (event["seq"], walker.name, found)
                named_late += 1
            else:
                assert name in (None, walker.name), (event["seq"], walker.name, found)
    assert named_late >= len(frames) // 2
    # Nobody else is ever given a gallery name: only the two walkers' own tracks.
    names = {
        (d["track_id"], d["attributes"]["faceid"]["name"])
        for e in frames
        for d in e["detections"]
        if "faceid" in d.get("attributes", {})
    }
    assert {n for _, n in names} <= {"alice", "bob", "unknown"}
    assert len({t for t, n in names if n == "alice"}) == 1
    assert len({t for t, n in names if n == "bob"}) == 1
    faceid = stats["stages"]["faceid"]
    assert faceid["most_calls_per_object"] <= faceid["attempts_per_round"]


def frames_of(clip: Path, events: list[dict[str, Any]], count: int) -> list[Frame]:
    """The clip's frames with the tracked people its frame events gave."""
    people = {e["seq"]: e["detections"] for e in events if e["event"] == "frame"}
    frames = []
    with av.open(str(clip)) as container:
        for seq, picture in enumerate(container.decode(video=0)):
            if seq >= count:
                break
            image = picture.to_ndarray(format="bgr24")
            found = [d for d in people[seq] if d["track_id"] >= 0]
            stream = StreamInfo("cam", str(clip), image.shape[1], image.shape[0], None)
            dets = Detections(
                np.array([d["xyxy"] for d in found] + [[5, 5, 5, 60]], np.float32),
                np.array([d["score"] for d in found] + [0.9], np.float32),
                np.zeros(len(found) + 1, np.int32),
                ("person",),
                np.array([d["track_id"] for d in found] + [999], np.int64),
            )
            frames.append(Frame("cam", seq, seq / 24.0, 0.0, image, stream, detections=dets))
    return frames


def test_a_changed_gallery_is_used_without_a_restart(
    footage: tuple[Path, Path, list[Walker]],
    faces_run: tuple[list[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    clip, gallery, walkers = footage
    events, _ = faces_run
    mine = tmp_path / "gallery"
    shutil.copytree(gallery, mine)
    face = DetectInsideStage("face", DetectInsideConfig(
        model="yunet", region=[0, 0, 1, 0.5], fit="square", input_size=[128, 128], conf=0.6,
        on_classes=["person"]))  # fmt: skip
    faceid = EmbedStage("faceid", EmbedConfig(
        model="mobilefacenet", on="face", gallery=str(mine), min_size=24, attempts=5,
        min_attempts=3, retry_s=0.0, gallery_check_s=0.01))  # fmt: skip
    faceid.bind(face)
    face.loaded_model()
    faceid.open(StageContext("faceid"))  # reads the gallery and starts watching it
    frames = frames_of(clip, events, 24)

    def names(batch: list[Frame]) -> list[str | None]:
        for frame in batch:
            face.process_batch([frame])
        faceid.process_batch(batch)
        last = batch[-1]
        assert last.detections is not None
        records = last.detections.to_records()
        bob = whose(records, walkers[1], last.seq)
        return [bob.get("attributes", {}).get("faceid", {}).get("name")]

    assert names(frames[:12]) == ["bob"]
    shutil.rmtree(mine / "bob")
    gallery = faceid.gallery
    assert gallery is not None
    deadline = time.monotonic() + 120
    while gallery.loads < 2:  # the watcher's thread reads the change
        assert time.monotonic() < deadline, "the changed gallery was never read"
        time.sleep(0.01)
    assert names(frames[12:]) == ["unknown"]
    assert gallery.loads == 2 and faceid.watcher is not None
    # The zero-width box at the frame's edge (track 999) was skipped and counted, never cut.
    assert face.counts["at_edge"] + face.counts["too_small"] >= 1
    assert face.counts["failed"] == 0
    face.close()
    faceid.close()
