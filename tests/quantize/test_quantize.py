"""``run-pipeline models quantize``: which nodes stay float, how agreement is counted, and an
INT8 and an FP16 copy of YOLOX-Nano made from a sample clip that the pipeline then runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.e2e.helpers import FILE_CONFIG, cli, read_events
from vapipe.pipeline.detections import Detections
from vapipe.quantize.calibration import agreement
from vapipe.quantize.quantize import recorded, tail_nodes


def small_graph() -> onnx.GraphProto:
    """conv1 -> conv2 -> (conv3 -> sigmoid, reshape) -> concat: a head whose last layers mix
    a convolution's output with its decode."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1"),
        helper.make_node("Conv", ["a", "w2"], ["b"], name="conv2"),
        helper.make_node("Conv", ["b", "w3"], ["c"], name="conv3"),
        helper.make_node("Sigmoid", ["c"], ["d"], name="sigmoid"),
        helper.make_node("Reshape", ["b", "shape"], ["e"], name="reshape"),
        helper.make_node("Concat", ["d", "e"], ["y"], name="concat", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return helper.make_graph(nodes, "head", [x], [y])


def test_the_tail_is_what_follows_the_last_convolutions() -> None:
    graph = small_graph()
    assert sorted(tail_nodes(graph, with_last_convs=False)) == ["concat", "reshape", "sigmoid"]
    # conv2 feeds conv3 (a convolution), so it is not one of the head's last layers.
    assert sorted(tail_nodes(graph, with_last_convs=True)) == [
        "concat", "conv3", "reshape", "sigmoid",
    ]  # fmt: skip


def boxes(*rows: tuple[int, float, list[float]]) -> Detections:
    return Detections(
        np.array([r[2] for r in rows], np.float32).reshape(-1, 4),
        np.array([r[1] for r in rows], np.float32),
        np.array([r[0] for r in rows], np.int32),
    )


def test_agreement_counts_same_class_boxes_at_iou_half_once_each() -> None:
    reference = [boxes((0, 0.9, [0, 0, 10, 10]), (1, 0.8, [20, 20, 30, 30])), boxes()]
    candidate = [
        boxes((0, 0.7, [0, 0, 10, 10]), (0, 0.6, [20, 20, 30, 30])),  # second: other class
        boxes((2, 0.5, [0, 0, 5, 5])),  # found only by the candidate: not in the share
    ]
    result = agreement(reference, candidate)
    assert result["matched"] == 0.5 and result["float_detections"] == 2
    assert result["mean_score_change"] == pytest.approx(-0.2, abs=1e-4)
    alone = [boxes((0, 0.9, [0, 0, 10, 10])), boxes()]
    shifted = [boxes((0, 0.9, [4, 0, 14, 10])), boxes()]  # IoU 6/14 < 0.5
    assert agreement(alone, shifted)["matched"] == 0.0
    twice = [boxes((0, 0.9, [0, 0, 10, 10]), (0, 0.8, [0, 0, 10, 10])), boxes()]
    once = [boxes((0, 0.9, [0, 0, 10, 10])), boxes()]
    assert agreement(twice, once)["matched"] == 0.5, "one candidate box matched twice"


@pytest.mark.parametrize(
    ("model", "to", "least"), [("yolov8n", "int8", 0.85), ("yolox-nano", "fp16", 0.95)]
)
def test_a_quantised_copy_records_its_agreement_and_runs_in_the_pipeline(
    tmp_path: Path, model: str, to: str, least: float
) -> None:
    target = tmp_path / f"{model}_{to}.onnx"
    table = ("--calibration-table", str(tmp_path / "table")) if to == "int8" else ()
    made = cli(
        "models", "quantize", model, "--calibrate", "sample:people", "--method", "minmax",
        "--frames", "20", "--to", to, "-o", str(target), *table, cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    if table:  # TensorRT's / MIGraphX's table: a range for every tensor, the input's 0..1
        ranges = json.loads((tmp_path / "table" / "calibration.json").read_text())["data"]
        assert (tmp_path / "table" / "calibration.flatbuffers").stat().st_size > 1000
        assert len(ranges) > 50
        highest = [r["highest"]["data"][0] for r in ranges.values()]
        assert any(0.9 < value <= 1.0 for value in highest)
    assert made.stdout.splitlines()[0] == str(target)
    facts = recorded(target)
    assert facts["quantization"] == to
    assert facts["calibration"]["frames"] == 16  # 20 taken, every 5th held out
    agreed = facts["agreement"]
    print(f"{to}: {json.dumps(agreed)}")
    assert agreed["held_out_frames"] == 4 and agreed["float_detections"] > 10
    assert agreed["matched"] >= least
    assert agreed["fps"] > 0 and agreed["float_fps"] > 0
    loaded = onnx.load(str(target))
    ops = {node.op_type for node in loaded.graph.node}
    if to == "int8":
        assert "QuantizeLinear" in ops and "DequantizeLinear" in ops
    else:
        assert loaded.graph.initializer[0].data_type == TensorProto.FLOAT16
    names = {p.key for p in loaded.metadata_props}
    info = cli("models", "info", str(target), cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert ["quantization", to] in [line.split() for line in info.stdout.splitlines()]
    assert "float detections matched" in info.stdout
    # Named as the manifest's own int8 file, it is still the copy made here, not that one.
    made_with = rf"made with\s+run-pipeline models quantize {model} \(onnxruntime"
    assert re.search(made_with, info.stdout), info.stdout
    assert "quantize_dynamic" not in info.stdout and "\nmanifest " not in info.stdout
    ran = cli(str(FILE_CONFIG), "--set", f"det.model={target}", "--max-frames", "8", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = [e for e in read_events(tmp_path / "out" / "events.jsonl") if e["event"] == "frame"]
    assert len(found) == 8 and any(e["detections"] for e in found)
    assert {"vapipe_agreement", "vapipe_quantization"} <= names
