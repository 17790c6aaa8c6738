"""The head decode appended to the ONNX model gives the numpy decoder's candidates."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tests.conftest import asset
from tests.stages.infer.test_device_decode import MODELS, clip_batch
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
from vapipe.stages.infer.graph_decode import (
    CANDIDATES,
    HeadLayout,
    append_decode,
    candidates_from_rows,
    unsupported,
)
from vapipe.stages.infer.heads import Family, decode, grid_cells
from vapipe.stages.nms import NmsConfig, NmsStage

NAMES = tuple(f"c{i}" for i in range(80))


def passthrough_model(shape: list[int | str], opset: int = 13, dtype: int = TensorProto.FLOAT):
    """A model whose output is its input: any raw head can be fed to the appended decode."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["output"])],
        "head",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("output", dtype, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_candidates(model: onnx.ModelProto, layout: HeadLayout, feed: np.ndarray) -> np.ndarray:
    extended = append_decode(model, layout)
    onnx.checker.check_model(extended, full_check=True)  # unique names, shapes that fit
    session = ort.InferenceSession(extended.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([CANDIDATES], {session.get_inputs()[0].name: feed})[0]


def assert_same_candidates(rows: np.ndarray, expected: list) -> None:
    got = candidates_from_rows(rows, NAMES)
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.names == NAMES and not mine.suppressed
        assert (mine.class_id == theirs.class_id).all()
        np.testing.assert_array_equal(mine.score, theirs.score)  # one multiply: exact
        np.testing.assert_allclose(mine.xyxy, theirs.xyxy, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("family", [Family.YOLOX, Family.YOLOV5, Family.YOLOV8])
def test_every_family_decodes_as_numpy_does(family: Family) -> None:
    width, height, classes = 320, 256, 7
    anchors = grid_cells(width, height) * (3 if family is Family.YOLOV5 else 1)
    rng = np.random.default_rng(1)
    if family is Family.YOLOV8:
        head = rng.random((3, 4 + classes, anchors), np.float32) * [[[300]] * 4 + [[1]] * classes]
    else:
        head = rng.random((3, anchors, 5 + classes), np.float32)
        head[..., :4] *= 4 if family is Family.YOLOX else 300
    head = head.astype(np.float32)
    model = passthrough_model(["batch", *head.shape[1:]])
    rows = run_candidates(model, HeadLayout(family, width, height), head)
    assert rows.shape == (3, anchors, 6) and rows.dtype == np.float32
    assert_same_candidates(rows, decode(family, head, width, height, NAMES))


def test_a_float16_head_is_decoded_in_float32() -> None:
    head = np.random.default_rng(2).random((2, 5, grid_cells(64, 64) * 3)).astype(np.float16)
    model = passthrough_model(["batch", *head.shape[1:]], dtype=TensorProto.FLOAT16)
    rows = run_candidates(model, HeadLayout(Family.YOLOV8, 64, 64), head)
    assert rows.dtype == np.float32
    assert_same_candidates(rows, decode(Family.YOLOV8, head, 64, 64, NAMES))


@pytest.mark.parametrize("model", list(MODELS))
def test_real_models_on_real_frames_give_the_same_detections(model: str) -> None:
    """YOLOX-Nano (opset 11) and YOLOv8n (opset 20) on frames of the three shared clips,
    through the backend as the pipeline loads it; then the nms node keeps the same boxes."""
    family, size, color, scale = MODELS[model]
    batch = clip_batch(size, color, scale)
    path = str(asset("models", model))
    config = OnnxRuntimeConfig(providers=["cpu"])
    host = OnnxBackend(path, name="det", config=config, max_batch=8)
    in_model = OnnxBackend(
        path, name="det", config=config, max_batch=8,
        head=lambda info, accelerated: HeadLayout(family, size, size),
    )  # fmt: skip
    assert host.head is None and in_model.head == HeadLayout(family, size, size)
    rows = in_model.run(batch)
    assert rows.shape[0] == len(batch) == 24 and rows.shape[2] == 6
    expected = decode(family, host.run(batch), size, size, NAMES)
    got = candidates_from_rows(rows, NAMES)
    nms = NmsStage("nms", NmsConfig())
    found = 0
    for mine, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(mine.score, theirs.score, atol=1e-5)
        kept, reference = nms.select(mine, None), nms.select(theirs, None)
        assert (kept.class_id == reference.class_id).all()
        np.testing.assert_allclose(kept.xyxy, reference.xyxy, atol=1e-3)
        found += len(kept)
    assert found > 20  # people, cars and horses


def test_what_cannot_be_decoded_in_the_model_says_why() -> None:
    shape = ["batch", grid_cells(64, 64), 85]
    layout = HeadLayout(Family.YOLOX, 64, 64)
    assert unsupported(passthrough_model(shape), layout) is None
    old = unsupported(passthrough_model(shape, opset=10), layout)
    assert old == "the model's opset 10 is older than 11"
    end2end = unsupported(passthrough_model(shape), HeadLayout(Family.END2END, 64, 64))
    assert end2end == "end2end heads are decoded in the model already"
    wrong_size = unsupported(passthrough_model(shape), HeadLayout(Family.YOLOX, 96, 64))
    assert wrong_size == "its 84 anchors do not fit the 126 cells of the input's grid"


def test_the_backend_decodes_on_the_host_when_the_model_cannot(tmp_path) -> None:
    path = tmp_path / "old.onnx"
    onnx.save(passthrough_model([1, grid_cells(64, 64), 85], opset=10), str(path))
    backend = OnnxBackend(
        str(path), name="det", config=OnnxRuntimeConfig(providers=["cpu"]), max_batch=1,
        head=lambda info, accelerated: HeadLayout(Family.YOLOX, 64, 64),
    )  # fmt: skip
    assert backend.head is None and "opset 10" in str(backend.head_problem)
    head = np.zeros((1, grid_cells(64, 64), 85), np.float32)
    assert backend.run(head).shape == head.shape  # the raw head, for the numpy decoder
