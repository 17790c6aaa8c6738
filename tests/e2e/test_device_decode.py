"""The head decoded where the model runs (torch device, or inside the ONNX model), end to end:
the same events as the numpy path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import FILE_CONFIG, cli, read_events
from tests.e2e.test_batching import assert_same_detections, detections_by_frame

TORCH = ["--set", "det.backend.type=torch", "--set", "det.backend.device=cpu"]


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
            "--set", "video.path=out/v.mp4", "--max-frames", "24", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        runs[name] = detections_by_frame(out)
        on_device = "head decode and NMS on torch:cpu" in result.stderr
        assert on_device == (name == "device"), result.stderr[-2000:]
    assert len(runs["numpy"]) == 24
    assert sum(len(d) for d in runs["numpy"].values()) > 24  # people were found
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
