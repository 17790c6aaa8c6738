"""The head decoded where the model runs (torch device, or inside the ONNX model), end to end:
the same events as the numpy path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import FILE_CONFIG, cli, read_events
from tests.e2e.test_batching import assert_same_detections, detections_by_frame

TORCH = ["--set", "det.backend.type=torch", "--set", "det.backend.device=cpu"]


NMS_IOU = 0.45  # configs/file.toml


def same(x: dict, y: dict) -> bool:
    return (
        x["class_id"] == y["class_id"]
        and abs(x["score"] - y["score"]) <= 2e-3
        and all(abs(p - q) <= 0.1 for p, q in zip(x["xyxy"], y["xyxy"], strict=True))
    )


def iou(p: list[float], q: list[float]) -> float:
    inter = max(0.0, min(p[2], q[2]) - max(p[0], q[0])) * max(
        0.0, min(p[3], q[3]) - max(p[1], q[1])
    )
    return inter / ((p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter)


def boundary_flip(first: list[dict], second: list[dict], slack: float = 0.002) -> bool:
    """Whether the two runs' detections of a frame differ, and a box that only one of them
    kept overlaps a better box of the same class that both kept by NMS's IoU threshold, to
    within ``slack`` (box corners are rounded to 0.01 px in events)."""
    only = [x for x in first if not any(same(x, y) for y in second)]
    only += [y for y in second if not any(same(y, x) for x in first)]
    common = [x for x in first if any(same(x, y) for y in second)]
    return bool(only) and any(
        abs(iou(x["xyxy"], c["xyxy"]) - NMS_IOU) <= slack
        for x in only
        for c in common
        if c["class_id"] == x["class_id"] and c["score"] > x["score"]
    )


def test_boundary_flip_is_told_apart_only_at_the_threshold() -> None:
    better = {"class_id": 0, "score": 0.9, "xyxy": [0.0, 0.0, 10.0, 10.0]}
    at = {"class_id": 0, "score": 0.5, "xyxy": [0.0, 0.0, 10.0, 4.5]}  # IoU 0.45 with better
    far = {"class_id": 0, "score": 0.5, "xyxy": [0.0, 0.0, 10.0, 6.0]}  # IoU 0.6
    assert boundary_flip([better, at], [better])
    assert not boundary_flip([better, far], [better])
    assert not boundary_flip([better, at], [better, at])
    assert not boundary_flip([better, {**at, "class_id": 1}], [better])


def test_device_decode_writes_the_events_the_numpy_path_writes(tmp_path: Path) -> None:
    """YOLOX here; both heads against real outputs in tests/stages/infer/test_device_decode.py."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    model = "yolox-nano"
    runs = {}
    for name, extra in {
        "numpy": ["--set", "det.decode_on_device=false"],
        "device": ["--set", "det.decode_on_device=true"],
    }.items():
        out = tmp_path / f"{name}.jsonl"
        result = cli(
            str(FILE_CONFIG), *TORCH, *extra, "--set", f"det.model={model}",
            "--set", "det.max_batch=4", "--set", f"events.path={out}",
            "--set", "det.batch_timeout_ms=60000",  # always 4 frames a batch: repeatable
            "--set", "video.path=out/v.mp4", "--max-frames", "24", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        runs[name] = detections_by_frame(out)
        on_device = "head decode and NMS on torch:cpu" in result.stderr
        assert on_device == (name == "device"), result.stderr[-2000:]
    assert len(runs["numpy"]) == 24
    assert sum(len(d) for d in runs["numpy"].values()) > 24  # people were found
    # Torch and numpy compute box corners a few 1e-5 pixels apart: where two boxes overlap
    # by IoU 0.45 to four decimals (nms.iou), one run keeps a box the other suppresses.
    # Such a frame is told apart, never more than one; every other frame must be the same.
    flipped = [key for key in runs["numpy"] if boundary_flip(runs["numpy"][key],
                                                             runs["device"][key])]  # fmt: skip
    assert len(flipped) <= 1, flipped
    for key in flipped:
        del runs["numpy"][key], runs["device"][key]
    assert_same_detections(runs["numpy"], runs["device"])
    assert read_events(tmp_path / "device.jsonl")  # and they are valid events


def test_onnxruntime_decoding_in_the_model_writes_the_events_of_the_numpy_path(
    tmp_path: Path,
) -> None:
    """On onnxruntime the decode is appended to the model (the default on accelerators; asked
    for here on the CPU provider): same detections as numpy's, for both model families."""
    for model in ("yolox-nano", "yolov8n"):
        runs = {}
        for on in (False, True):
            out = tmp_path / f"{model}-{on}.jsonl"
            result = cli(
                str(FILE_CONFIG), "--set", f"det.decode_on_device={str(on).lower()}",
                "--set", f"det.model={model}", "--set", "det.max_batch=4",
                "--set", f"events.path={out}", "--set", "video.path=out/v.mp4",
                "--max-frames", "16", "--stats", str(tmp_path / "stats.json"), cwd=tmp_path,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]
            stats = json.loads((tmp_path / "stats.json").read_text())["stages"]["det"]
            assert stats["head_decode"] == ("in the model" if on else "host")
            runs[on] = detections_by_frame(out)
        assert len(runs[False]) == 16 and sum(len(d) for d in runs[False].values()) > 16
        assert_same_detections(runs[False], runs[True])
