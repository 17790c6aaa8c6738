"""YOLOv5 and end-to-end heads through the real pipeline, with small ONNX graphs built here.

Each graph ignores its picture (its output is a constant added to 0 x the input's mean), so
the boxes that come out are known: we check decoding, NMS and mapping back to frame pixels.
dog.jpg is 768x576; at 64x64 with Ultralytics' centred letterbox the scale is 1/12 and the
picture sits 8 px down.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.helpers import FILE_CONFIG, cli, read_events

SIZE = 64


def constant_model(output: np.ndarray, path: Path, names: str | None = None) -> Path:
    """images (1, 3, 64, 64) -> output (constant, plus 0 x mean(images))."""
    const = numpy_helper.from_array(output.astype(np.float32), "const")
    zero = numpy_helper.from_array(np.zeros(1, np.float32), "zero")
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["const", "nothing"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constant-head",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(output.shape))],
        initializer=[const, zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if names:
        helper.set_model_props(model, {"names": names})
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def dog_cli(model: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The file pipeline on dog.jpg with ``model`` and nms.conf 0.5."""
    return cli(
        str(FILE_CONFIG),
        "--set",
        "cam.uri=sample:dog",
        "--set",
        f"det.model={model}",
        "--set",
        "nms.conf=0.5",
        *extra,
        cwd=tmp_path,
    )


def run_on_dog(model: Path, tmp_path: Path, *extra: str) -> list[dict]:
    result = dog_cli(model, tmp_path, *extra)
    assert result.returncode == 0, result.stderr[-2000:]
    (event,) = read_events(tmp_path / "out/events.jsonl")
    return event["detections"]


def test_yolov5_head(tmp_path: Path) -> None:
    anchors = 3 * sum((SIZE // s) ** 2 for s in (8, 16, 32))  # three anchors per cell
    output = np.zeros((1, anchors, 5 + 2), np.float32)
    output[0, 10] = [32, 32, 16, 16, 0.9, 0.1, 0.9]  # class 1 ("dog") at 0.81
    output[0, 11] = [33, 32, 16, 16, 0.8, 0.1, 0.9]  # overlaps the first: suppressed
    output[0, 50] = [10, 20, 4, 8, 0.9, 0.7, 0.2]  # class 0 at 0.63
    output[0, 60] = [50, 50, 4, 4, 0.3, 0.9, 0.1]  # 0.27: below conf
    model = constant_model(output, tmp_path / "v5.onnx", names="{0: 'cat', 1: 'dog'}")
    detections = run_on_dog(model, tmp_path)
    assert [d["class_name"] for d in detections] == ["dog", "cat"]
    assert detections[0]["score"] == pytest.approx(0.81, abs=1e-4)
    # (24, 24, 40, 40) in the input -> x / (1/12), (y - 8) / (1/12)
    assert detections[0]["xyxy"] == pytest.approx([288, 192, 480, 384], abs=0.01)
    assert detections[1]["xyxy"] == pytest.approx([96, 96, 144, 192], abs=0.01)


def test_end_to_end_head_needs_no_nms(tmp_path: Path) -> None:
    output = np.zeros((1, 300, 6), np.float32)
    output[0, 0] = [24, 24, 40, 40, 0.95, 16]  # COCO 16 = dog
    output[0, 1] = [25, 24, 40, 40, 0.90, 16]  # overlapping, but the model already chose
    output[0, 2] = [0, 8, 64, 56, 0.40, 1]  # below conf
    model = constant_model(output, tmp_path / "e2e.onnx")
    detections = run_on_dog(model, tmp_path, "--stats", "stats.json")
    assert [d["class_name"] for d in detections] == ["dog", "dog"]
    assert detections[0]["xyxy"] == pytest.approx([288, 192, 480, 384], abs=0.01)
    assert '"model_family": "end2end"' in (tmp_path / "stats.json").read_text()


def test_family_can_be_forced(tmp_path: Path) -> None:
    output = np.zeros((1, 300, 6), np.float32)
    output[0, 0] = [24, 24, 40, 40, 0.95, 16]
    model = constant_model(output, tmp_path / "e2e.onnx")
    result = dog_cli(model, tmp_path, "--set", "det.family=yolov8")
    # Read as a YOLOv8 head, a (300, 6) output holds no class rows: a config error, in one
    # line, rather than nonsense boxes.
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: node 'det' key 'family': family 'yolov8' does not fit output shape "
        "[1, 300, 6]: expected (batch, 4 + classes, anchors)"
    )
    forced = dog_cli(model, tmp_path, "--set", "det.family=end2end")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert len(read_events(tmp_path / "out/events.jsonl")[0]["detections"]) == 1
