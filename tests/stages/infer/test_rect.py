"""infer.rect: pictures padded only up to a multiple of 32, the model made to take them, frames
of other sizes batched by size, and models or backends that cannot refused or told."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

import vapipe
from tests.conftest import asset
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
from vapipe.stages.infer.heads import grid_cells
from vapipe.stages.infer.stage import InferConfig, InferStage
from vapipe.stages.model_input import rect_size
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage


@pytest.mark.parametrize(
    ("frame", "placement", "expected"),
    [
        ((640, 360), "top-left", (416, 256)),  # 416x234 at scale 0.65
        ((640, 360), "center", (416, 256)),
        ((360, 640), "top-left", (256, 416)),
        ((1280, 720), "center", (416, 256)),
        ((500, 500), "top-left", (416, 416)),
        ((800, 450), "top-left", (416, 256)),  # 416x234
        ((768, 576), "top-left", (416, 320)),  # 416x312
        ((4000, 100), "center", (416, 32)),  # never under one stride
        ((416, 256), "top-left", (416, 256)),  # a multiple of 32 already: nothing added
        ((256, 416), "center", (256, 416)),
    ],
)
def test_rect_size_pads_to_the_stride_only(
    frame: tuple[int, int], placement: Any, expected: tuple[int, int]
) -> None:
    assert rect_size(*frame, 416, 416, placement, 32) == expected


def onnx_backend(model: str, rect: bool, max_batch: int = 1) -> OnnxBackend:
    settings = OnnxRuntimeConfig.model_validate({"threads": 1, "providers": "cpu"})
    return OnnxBackend(
        str(asset("models", model)), name="det", config=settings, max_batch=max_batch, rect=rect
    )


def test_yolox_takes_rect_inputs_and_keeps_its_square_as_the_default() -> None:
    rect, square = onnx_backend("yolox_nano.onnx", True), onnx_backend("yolox_nano.onnx", False)
    assert rect.rect_problem is None and square.rect_problem is None
    assert rect.info.input_shape[1:] == [3, 416, 416]  # what preprocessing sizes up to
    assert rect.info.output_shape[1:] == [3549, 85]  # what the family is told from
    wide = np.random.default_rng(0).random((2, 3, 256, 416), np.float32) * 255
    assert rect.run(wide).shape == (2, grid_cells(416, 256), 85)
    image = np.random.default_rng(1).random((1, 3, 416, 416), np.float32) * 255
    np.testing.assert_allclose(rect.run(image), square.run(image), rtol=1e-5, atol=1e-3)


def test_a_model_with_its_anchors_fixed_cannot_and_still_batches() -> None:
    backend = onnx_backend("yolov8n.onnx", True, max_batch=4)
    assert backend.rect_problem is not None and "input size" in backend.rect_problem
    assert backend.batch_mode == "dynamic (rewritten)"
    assert backend.info.input_shape[1:] == [3, 640, 640]
    batch = np.zeros((3, 3, 640, 640), np.float32)
    assert backend.run(batch).shape == (3, 84, 8400)


def infer_node(model: str, rect: bool, backend: str = "onnxruntime") -> InferStage:
    config = InferConfig.model_validate(
        {"model": str(asset("models", model)), "rect": rect, "max_batch": 4,
         "backend": {"type": backend, "providers": "cpu"} if backend == "onnxruntime"
         else {"type": backend, "device": "cpu"}}
    )  # fmt: skip
    stage = InferStage("det", config)
    stage.open(StageContext("det"))
    return stage


def test_the_infer_node_refuses_rect_for_such_a_model_in_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        infer_node("yolov8n.onnx", True)
    assert caught.value.key == "rect"
    assert "yolov8n.onnx" in str(caught.value) and "rect = false" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_backend_without_rect_says_so_and_keeps_the_square(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    with caplog.at_level(logging.WARNING):
        stage = infer_node("yolox_nano.onnx", True, backend="torch")
    assert stage.model.input.rect is False
    assert "rect = true needs the onnxruntime backend" in caplog.text
    pre = PreprocessStage("pre", PreprocessConfig())
    pre.bind(stage.model)
    pre.open(StageContext("pre"))
    tensor, _ = pre.tensor(np.zeros((360, 640, 3), np.uint8))
    assert tensor.shape == (3, 416, 416)


def frame_of(source: str, width: int, height: int, seed: int) -> Frame:
    image = np.random.default_rng(seed).integers(0, 255, (height, width, 3), np.uint8)
    return Frame(source, 0, 0.0, 0.0, image, StreamInfo(source, "x", width, height, 25.0))


def test_frames_of_other_sizes_are_batched_by_size_and_decoded_on_their_grid() -> None:
    det = infer_node("yolox_nano.onnx", True)
    assert det.model.input.rect is True and det.stats()["rect"] is True
    pre = PreprocessStage("pre", PreprocessConfig())
    pre.bind(det.model)
    pre.open(StageContext("pre"))
    frames = [frame_of("wide", 640, 360, 0), frame_of("tall", 360, 640, 1),
              frame_of("wide2", 1280, 720, 2)]  # fmt: skip
    det.process_batch(pre.process_batch(frames))
    shapes = [f.tensor.shape for f in frames if f.tensor is not None]
    assert shapes == [(3, 256, 416), (3, 416, 256), (3, 256, 416)]
    # YOLOX's picture sits top-left; the border is the pad grey, at the bottom or right.
    assert np.all(frames[0].tensor[:, 234:, :] == 114) and frames[0].tensor[:, 233, :].std() > 0
    assert np.all(frames[1].tensor[:, :, 234:] == 114)
    found = [len(f.detections) for f in frames if f.detections is not None]
    assert found == [grid_cells(416, 256), grid_cells(256, 416), grid_cells(416, 256)]
    assert [f.letterbox.scale for f in frames if f.letterbox] == pytest.approx([0.65, 0.65, 0.325])


def boxes_per_frame(rect: bool) -> list[np.ndarray]:
    text = f"""
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "{asset("media", "traffic.mp4")}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "{asset("models", "yolox_nano.onnx")}"
rect = {str(rect).lower()}
backend = {{ type = "onnxruntime", providers = "cpu", threads = 1 }}
[nodes.nms]
type = "nms"
conf = 0.3
[nodes.events]
type = "events"
path = "unused.jsonl"
"""
    pipeline = vapipe.Pipeline.from_string(text, max_frames=30)
    return [
        np.array([d["xyxy"] for d in event["detections"]], np.float32).reshape(-1, 4)
        for event in pipeline.events()
        if event["event"] == "frame"
    ]


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    low, high = (
        np.maximum(a[:, None, :2], b[None, :, :2]),
        np.minimum(a[:, None, 2:], b[None, :, 2:]),
    )
    inter = np.prod(np.clip(high - low, 0, None), axis=2)
    area = lambda x: np.prod(x[:, 2:] - x[:, :2], axis=1)  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def test_rect_finds_the_cars_the_square_finds(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    square, rect = boxes_per_frame(False), boxes_per_frame(True)
    assert len(square) == len(rect) == 30
    total = sum(len(b) for b in square)
    assert total >= 30  # cars in every frame of the clip
    matched = sum(
        int((iou(s, r).max(axis=1) >= 0.8).sum())
        for s, r in zip(square, rect, strict=True)
        if len(s) and len(r)
    )
    assert matched >= 0.9 * total
    assert abs(sum(len(b) for b in rect) - total) <= 0.1 * total
