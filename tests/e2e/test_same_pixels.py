"""``pre.backend`` changes no detection: numpy and OpenCL preprocessing see the same pixels
(one colour conversion on every path), through the real pipeline, on the three sample clips
with both model families."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, cli, read_events

FRAMES = 24
IOU = 0.9


def detections(tmp_path: Path, clip: str, model: str, backend: str) -> dict[int, list[dict]]:
    cwd = tmp_path / backend
    cwd.mkdir()
    result = cli(
        str(FILE_CONFIG),
        "--set", f"cam.uri={asset('media', f'{clip}.mp4')}",
        "--set", f"det.model={model}",
        "--set", f"pre.backend={backend}",
        "--set", "nms.conf=0.25",
        "--max-frames", str(FRAMES),
        cwd=cwd,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    if backend == "opencl":
        assert "OpenCL preprocessing on" in result.stderr, "fell back to numpy"
    events = read_events(cwd / "out" / "events.jsonl")
    return {e["seq"]: e["detections"] for e in events if e["event"] == "frame"}


def iou(a: list[float], b: list[float]) -> float:
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def matched_share(left: dict[int, list[dict]], right: dict[int, list[dict]]) -> float:
    """Detections with a partner of the same class at IoU >= 0.9 in the other run's frame,
    over the larger count of the two (greedy by score, each used once)."""
    matched = total = 0
    for seq in sorted(set(left) | set(right)):
        ours, theirs = left.get(seq, []), list(right.get(seq, []))
        total += max(len(ours), len(theirs))
        for box in sorted(ours, key=lambda d: -d["score"]):
            same = [d for d in theirs if d["class_id"] == box["class_id"]]
            best = max(same, key=lambda d: iou(box["xyxy"], d["xyxy"]), default=None)
            if best is not None and iou(box["xyxy"], best["xyxy"]) >= IOU:
                matched += 1
                theirs.remove(best)
    return matched / total if total else 1.0


@pytest.mark.opencl
@pytest.mark.parametrize("model", ["yolox-nano", "yolov8n"])
@pytest.mark.parametrize("clip", ["people", "traffic", "horses"])
def test_numpy_and_opencl_preprocessing_find_the_same_objects(
    tmp_path: Path, clip: str, model: str
) -> None:
    numpy_run = detections(tmp_path, clip, model, "numpy")
    opencl_run = detections(tmp_path, clip, model, "opencl")
    assert len(numpy_run) == len(opencl_run) == FRAMES
    found = sum(len(d) for d in numpy_run.values())
    assert found >= FRAMES, f"too few detections to compare ({found})"
    share = matched_share(numpy_run, opencl_run)
    print(f"{clip} {model}: {share:.2%} of {found} detections matched at IoU {IOU}")
    assert share >= 0.995


def test_matched_share_counts_a_moved_box_as_unmatched() -> None:
    box = {"xyxy": [0.0, 0.0, 100.0, 100.0], "score": 0.9, "class_id": 0}
    moved = {**box, "xyxy": [6.0, 0.0, 106.0, 100.0]}  # IoU 0.89
    other_class = {**box, "class_id": 1}
    assert matched_share({0: [box]}, {0: [box]}) == 1.0
    assert matched_share({0: [box]}, {0: [moved]}) == 0.0
    assert matched_share({0: [box]}, {0: [other_class]}) == 0.0
    assert matched_share({0: [box, box]}, {0: [box]}) == 0.5
    assert np.isclose(iou(box["xyxy"], moved["xyxy"]), 94 / 106)


TORCH_GRAPH = """
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "{clip}"
[nodes.pre]
type = "preprocess"
backend = "{backend}"
[nodes.det]
type = "infer"
model = "yolov8n"
max_batch = 4
[nodes.det.backend]
type = "torch"
device = "cpu"
cache_dir = "off"
[nodes.nms]
type = "nms"
conf = 0.25
[nodes.events]
type = "events"
path = "out/events.jsonl"
"""


def test_torch_preprocessing_hands_the_model_the_numpy_tensor(tmp_path: Path) -> None:
    """``pre.backend = "torch"`` letterboxes where a torch infer node runs (its CPU here) and
    hands it the batch there: the model gets the numpy path's tensor bit for bit, so every
    box of every frame is the same, to the last digit."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    runs = {}
    for backend in ("numpy", "torch"):
        cwd = tmp_path / backend
        cwd.mkdir()
        config = cwd / "graph.toml"
        config.write_text(TORCH_GRAPH.format(clip=asset("media", "people.mp4"), backend=backend))
        result = cli(str(config), "--max-frames", str(FRAMES), cwd=cwd)
        assert result.returncode == 0, result.stderr[-2000:]
        assert ("where the model runs" in result.stderr) == (backend == "torch")
        events = read_events(cwd / "out" / "events.jsonl")
        runs[backend] = {e["seq"]: e["detections"] for e in events if e["event"] == "frame"}
    assert len(runs["torch"]) == FRAMES
    assert sum(len(d) for d in runs["numpy"].values()) >= FRAMES
    assert runs["torch"] == runs["numpy"]
