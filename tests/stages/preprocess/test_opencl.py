"""The OpenCL letterbox kernel on PoCL's CPU device: parity with the numpy path, fallback."""

from __future__ import annotations

import logging

import av
import cv2
import numpy as np
import pytest

from tests.conftest import asset
from vapipe.pipeline.stage import StageContext
from vapipe.stages.infer.heads import decode
from vapipe.stages.infer.stage import InferConfig, InferStage
from vapipe.stages.nms import NmsConfig, NmsStage
from vapipe.stages.preprocess.cl_kernel import LetterboxProgram, TensorSpec
from vapipe.stages.preprocess.opencl import OpenCLLetterbox, same_shape_runs
from vapipe.stages.preprocess.resize_tables import resize_reference
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

CLIPS = ("people", "traffic", "horses")


def frames(clip: str, count: int, step: int = 7) -> list[np.ndarray]:
    with av.open(str(asset("media", f"{clip}.mp4"))) as container:
        decoded = (f.to_ndarray(format="bgr24") for f in container.decode(video=0))
        return [image for index, image in enumerate(decoded) if index % step == 0][:count]


def numpy_stage(size: int, placement: str, color: str, scale: float, **extra) -> PreprocessStage:
    stage = PreprocessStage(
        "pre",
        PreprocessConfig(
            input_size=[size, size], placement=placement, color=color, scale=scale, **extra
        ),
    )
    stage.open(StageContext("pre"))
    return stage


@pytest.mark.parametrize(
    "shape",
    [
        (450, 800, 416, 234),
        (360, 640, 640, 360),
        (480, 720, 1000, 700),
        (101, 203, 417, 301),
        (832, 832, 416, 416),
    ],
)
def test_integer_tables_reproduce_cv2_resize(shape: tuple[int, int, int, int]) -> None:
    src_h, src_w, dst_w, dst_h = shape
    image = np.random.default_rng(src_w).integers(0, 256, (src_h, src_w, 3), dtype=np.uint8)
    expected = cv2.resize(image, (dst_w, dst_h), interpolation=cv2.INTER_LINEAR)
    got = resize_reference(image, dst_w, dst_h)
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1
    assert (got != expected).mean() <= 1e-3


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize(
    ("size", "placement", "color", "scale", "tolerance"),
    [
        (416, "top-left", "bgr", 1.0, 1.0),  # YOLOX: 0-255, so one level is 1.0
        (640, "center", "rgb", 1 / 255, 1 / 255),  # Ultralytics: 0-1
    ],
)
def test_tensor_parity_on_real_frames(
    device, clip: str, size: int, placement: str, color: str, scale: float, tolerance: float
) -> None:
    reference = numpy_stage(size, placement, color, scale)
    kernel = OpenCLLetterbox(TensorSpec(size, size, placement, color == "rgb", scale))
    differing = 0
    for image in frames(clip, 6):
        expected, expected_box = reference.tensor(image)
        got, box = kernel.tensor(image)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert box == expected_box
        worst = float(np.abs(got - expected).max())
        assert worst <= tolerance + 1e-6, f"{clip}: max difference {worst}"
        differing += int((got != expected).sum())
        # The padding is part of the contract too.
        if placement == "top-left":
            assert (got[:, box.resized_h :, :] == 114).all()
    assert differing == 0 or differing / (6 * got.size) < 1e-3


def test_half_output_and_mean_std(device) -> None:
    image = frames("horses", 1)[0]
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    reference = numpy_stage(320, "center", "rgb", 1 / 255, mean=mean, std=std)
    expected, _ = reference.tensor(image)
    conv = TensorSpec(320, 320, "center", True, 1 / 255, tuple(mean), tuple(std))
    got, _ = OpenCLLetterbox(conv).tensor(image)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    half = OpenCLLetterbox(
        TensorSpec(320, 320, "center", True, 1 / 255, dtype=np.dtype(np.float16))
    )
    got16, _ = half.tensor(image)
    expected16 = numpy_stage(320, "center", "rgb", 1 / 255).tensor(image)[0].astype(np.float16)
    assert got16.dtype == np.float16
    np.testing.assert_array_equal(got16, expected16)


def test_frames_of_different_sizes_through_one_ring(device) -> None:
    kernel = OpenCLLetterbox(TensorSpec(416, 416, "top-left", False, 1.0), depth=2)
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    images = [frames(clip, 1)[0] for clip in ("traffic", "people", "horses", "traffic")]
    pending = [kernel.submit([images[0]]), kernel.submit([images[1]])]
    results = [kernel.result(pending[0])[0]]
    pending.append(kernel.submit([images[2]]))
    results.append(kernel.result(pending[1])[0])
    results.append(kernel.result(pending[2])[0])
    for image, got in zip(images, results, strict=False):
        np.testing.assert_array_equal(got, reference.tensor(image)[0])


def test_batched_launch_writes_each_frame_at_its_index(device) -> None:
    import pyopencl as cl

    program = LetterboxProgram(device, np.dtype(np.float32))
    queue = cl.CommandQueue(program.context)
    images = np.stack(frames("people", 2))
    conv = TensorSpec(416, 416, "top-left", False, 1.0)
    mf = cl.mem_flags
    src = cl.Buffer(program.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=images)
    out = np.full((3, 3, 416, 416), -1, np.float32)
    out_buf = cl.Buffer(program.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    event, _ = program.launch(queue, src, images.shape[1:3], 2, conv, out_buf, out_index=1)
    cl.enqueue_copy(queue, out, out_buf, wait_for=[event])
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    assert (out[0] == -1).all(), "slot 0 of the batch was written"
    for index in range(2):
        np.testing.assert_array_equal(out[index + 1], reference.tensor(images[index])[0])


def test_no_matching_device_falls_back_to_numpy(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    stage = PreprocessStage(
        "pre",
        PreprocessConfig(
            backend="opencl",
            platform="NoSuchVendor",
            input_size=[64, 64],
            placement="center",
            color="rgb",
            scale=1 / 255,
        ),
    )
    stage.open(StageContext("pre"))
    assert stage.opencl is None and stage.stats() == {"device": "numpy"}
    assert (
        "OpenCL unavailable (no OpenCL device on a platform matching 'NoSuchVendor')" in caplog.text
    )
    image = np.zeros((48, 64, 3), np.uint8)
    (frame_out,) = stage.process(
        type("F", (), {"image": image, "tensor": None, "letterbox": None, "predicted": False})()
    )
    assert frame_out.tensor.shape == (3, 64, 64)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def matched_fraction(first, second) -> float:
    """Share of detections in ``first`` with a same-class partner at IoU >= 0.9 in ``second``."""
    total = matched = 0
    for a, b in zip(first, second, strict=True):
        total += len(a)
        if len(a) and len(b):
            overlaps = iou(a.xyxy, b.xyxy) * (a.class_id[:, None] == b.class_id[None, :])
            matched += int((overlaps.max(axis=1) >= 0.9).sum())
    return matched / total if total else 1.0


@pytest.mark.parametrize("model", ["yolox-nano", "yolov8n"])
def test_detections_agree_between_backends(device, model: str) -> None:
    infer = InferStage("det", InferConfig(model=model, backend={"threads": 2}))
    infer.open(StageContext("det"))
    nms = NmsStage("nms", NmsConfig(conf=0.25))
    context = StageContext("pre")
    backends = {}
    for backend in ("numpy", "opencl"):
        stage = PreprocessStage("pre", PreprocessConfig(backend=backend))
        stage.bind(infer.model)
        stage.open(context)
        backends[backend] = stage
    assert backends["opencl"].opencl is not None
    results: dict[str, list] = {"numpy": [], "opencl": []}
    for clip in CLIPS:
        for image in frames(clip, 5, step=23):
            for name, stage in backends.items():
                tensor, box = stage.tensor(image) if name == "numpy" else stage.opencl.tensor(image)
                (found,) = decode(
                    infer.model.family,
                    infer.model.backend.run(tensor[None]),
                    infer.model.input.width,
                    infer.model.input.height,
                    infer.model.names,
                )
                results[name].append(nms.select(found, box))
    assert sum(map(len, results["numpy"])) > 20
    assert matched_fraction(results["numpy"], results["opencl"]) >= 0.97
    assert matched_fraction(results["opencl"], results["numpy"]) >= 0.97


def test_a_batch_of_mixed_sizes_lands_in_one_buffer_at_each_frames_index(device) -> None:
    kernel = OpenCLLetterbox(TensorSpec(416, 416, "top-left", False, 1.0), max_batch=4)
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    images = [frames(clip, 1)[0] for clip in ("traffic", "people", "horses")]
    pending = kernel.submit(images)
    batch = kernel.result(pending)
    assert batch.shape == (3, 3, 416, 416)
    for index, image in enumerate(images):
        expected, box = reference.tensor(image)
        np.testing.assert_array_equal(batch[index], expected)
        assert pending.letterboxes[index] == box
    with pytest.raises(ValueError, match="submit takes 1 to 4 frames, got 5"):
        kernel.submit(images + images[:2])


def test_frames_of_one_size_share_a_launch_and_each_lands_at_its_index(device, monkeypatch) -> None:
    kernel = OpenCLLetterbox(TensorSpec(416, 416, "center", True, 1 / 255), max_batch=8)
    reference = numpy_stage(416, "center", "rgb", 1 / 255)
    traffic, people = frames("traffic", 3), frames("people", 2)
    images = [traffic[0], traffic[1], people[0], people[1], traffic[2]]
    launches: list[tuple[int, int]] = []
    launch = kernel.program.launch

    def counted(*args, **kwargs):
        launches.append((args[3], kwargs["out_index"]))
        return launch(*args, **kwargs)

    monkeypatch.setattr(kernel.program, "launch", counted)
    pending = kernel.submit(images)
    batch = kernel.result(pending)
    assert launches == [(2, 0), (2, 2), (1, 4)]  # (frames, first index) per launch
    for index, image in enumerate(images):
        expected, box = reference.tensor(image)
        np.testing.assert_array_equal(batch[index], expected)
        assert pending.letterboxes[index] == box


def test_same_shape_runs_follow_the_order_of_the_frames() -> None:
    a, b, c = np.zeros((6, 4), np.uint8), np.zeros((4, 4, 3), np.uint8), np.zeros((6, 8), np.uint8)
    assert same_shape_runs([a, a, b, b, b, a, c, c]) == [(0, 2), (2, 3), (5, 1), (6, 2)]
    assert same_shape_runs([b]) == [(0, 1)]
    assert same_shape_runs([]) == []


def test_as_batch_takes_consecutive_views_without_copying() -> None:
    from vapipe.stages.infer.stage import as_batch

    batch = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5).copy()  # owns its data
    assert as_batch([batch[0], batch[1]]) is batch
    swapped = as_batch([batch[1], batch[0]])
    assert swapped is not batch
    np.testing.assert_array_equal(swapped, batch[::-1])
    single = as_batch([batch[0]])
    assert single.shape == (1, 3, 4, 5) and single.base is not batch
