"""Decode and NMS on the torch device, end to end: the same events as the numpy path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import FILE_CONFIG, cli, read_events
from tests.e2e.test_batching import assert_same_detections, detections_by_frame

pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

TORCH = ["--set", "det.backend.type=torch", "--set", "det.backend.device=cpu"]


def test_device_decode_writes_the_events_the_numpy_path_writes(tmp_path: Path) -> None:
    """YOLOX here; both heads against real outputs in tests/stages/infer/test_device_decode.py."""
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


def test_device_decode_on_onnxruntime_is_a_config_error(tmp_path: Path) -> None:
    result = cli(str(FILE_CONFIG), "--set", "det.decode_on_device=true", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith("node 'det' key 'decode_on_device': it needs backend = \"torch\"")
    ), result.stderr[-500:]
