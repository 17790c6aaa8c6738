"""The letterbox in torch (preprocess ``backend = "torch"``), on torch's CPU device here: the
same tensor as the numpy path bit for bit, from I420 and BGR frames; each frame of a batch at
its index; the batch handed to a torch infer node as it is; the choice ``auto`` makes."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from tests.stages.preprocess.test_opencl import frames, numpy_stage
from tests.stages.preprocess.test_yuv import i420_frames
from vapipe.pipeline.device_picture import DeviceNV12, i420_to_nv12
from vapipe.stages.preprocess.cl_kernel import TensorSpec

torch = pytest.importorskip("torch")

from vapipe.stages.preprocess.torch_letterbox import TorchLetterbox  # noqa: E402

CPU = torch.device("cpu")
LAYOUTS = [
    # (size, placement, color, scale): YOLOX's conventions, then Ultralytics'
    (416, "top-left", "bgr", 1.0),
    (640, "center", "rgb", 1 / 255),
]


def letterbox(size: int, placement: str, color: str, scale: float, **extra) -> TorchLetterbox:
    spec = TensorSpec(size, size, placement, color == "rgb", scale, **extra)  # type: ignore[arg-type]
    return TorchLetterbox(spec, torch, CPU, max_batch=4)


@pytest.mark.parametrize(("size", "placement", "color", "scale"), LAYOUTS)
def test_real_i420_and_bgr_frames_give_the_numpy_tensor_bit_for_bit(
    size: int, placement: str, color: str, scale: float
) -> None:
    front = letterbox(size, placement, color, scale)
    reference = numpy_stage(size, placement, color, scale)
    for clip in ("people", "traffic", "horses"):
        planes = i420_frames(clip, 3)
        bgr = [cv2.cvtColor(p, cv2.COLOR_YUV2BGR_I420) for p in planes]
        pending = front.submit([planes[0], bgr[1], planes[2]])  # both layouts in one batch
        got = front.result(pending)
        assert isinstance(got, torch.Tensor) and got.shape == (3, 3, size, size)
        for index, image in enumerate(bgr):
            expected, box = reference.tensor(image)
            assert np.array_equal(got[index].numpy(), expected), (clip, index)
            assert pending.letterboxes[index] == box


@pytest.mark.parametrize(("size", "placement", "color", "scale"), LAYOUTS)
def test_nv12_pictures_on_the_device_give_the_numpy_tensor_bit_for_bit(
    size: int, placement: str, color: str, scale: float
) -> None:
    """A hardware decoder's NV12 pictures, read where they lie, beside host I420 and BGR
    frames of the same size in one batch (the same shape as I420: told apart by place)."""
    front = letterbox(size, placement, color, scale)
    reference = numpy_stage(size, placement, color, scale)
    for clip in ("people", "horses"):
        planes = i420_frames(clip, 4)
        bgr = [cv2.cvtColor(p, cv2.COLOR_YUV2BGR_I420) for p in planes]
        nv12 = [DeviceNV12(torch.from_numpy(i420_to_nv12(p)), None, 0, 1) for p in planes]
        pending = front.submit([nv12[0], planes[1], nv12[2], bgr[3]])
        got = front.result(pending)
        for index, image in enumerate(bgr):
            expected, box = reference.tensor(image)
            assert np.array_equal(got[index].numpy(), expected), (clip, index)
            assert pending.letterboxes[index] == box


@pytest.mark.parametrize(
    ("height", "width"),
    [(1080, 1920), (270, 480), (100, 30), (416, 416), (202, 606)],
    ids=["down", "up", "tall", "same-size", "rows-of-two"],
)
def test_any_size_resized_up_or_down_matches_numpy(height: int, width: int) -> None:
    rng = np.random.default_rng(width)
    planes = rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    bgr = cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420)
    for layout in LAYOUTS:
        got = letterbox(*layout).result(letterbox(*layout).submit([planes, bgr]))  # type: ignore[arg-type]
        expected, _ = numpy_stage(*layout).tensor(bgr)  # type: ignore[arg-type]
        assert np.array_equal(got[0].numpy(), expected), layout
        assert np.array_equal(got[1].numpy(), expected), layout


def test_half_output_mean_and_std_follow_the_numpy_order_of_operations() -> None:
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    front = TorchLetterbox(
        TensorSpec(320, 320, "center", True, 1 / 255, tuple(mean), tuple(std), 100,
                   np.dtype(np.float16)),
        torch, CPU, max_batch=2,
    )  # fmt: skip
    reference = numpy_stage(320, "center", "rgb", 1 / 255, mean=mean, std=std, pad_value=100)
    reference.dtype = np.dtype(np.float16)
    for image in frames("traffic", 2):
        got = front.result(front.submit([image]))
        assert got.dtype == torch.float16
        expected, _ = reference.tensor(image)
        assert np.array_equal(got[0].numpy(), expected)
        # The border is the pad value through the same arithmetic, channel by channel.
        pad = (np.float32(100) * np.float32(1 / 255) - np.float32(mean)) / np.float32(std)
        assert np.array_equal(got[0, :, 0, 0].numpy(), pad.astype(np.float16))


def test_frames_of_different_sizes_land_at_their_index_with_their_letterbox() -> None:
    front = letterbox(416, "top-left", "bgr", 1.0)
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    small, large = frames("people", 1)[0], frames("traffic", 1)[0]
    small = cv2.resize(small, (320, 180))
    order = [large, small, small, large]
    pending = front.submit(order)
    got = front.result(pending)
    for index, image in enumerate(order):
        expected, box = reference.tensor(image)
        assert np.array_equal(got[index].numpy(), expected), index
        assert pending.letterboxes[index] == box


def test_batches_in_flight_keep_their_own_frames() -> None:
    """Two batches submitted before either is collected (the ring's depth): the second's
    frames must not overwrite the first's staging."""
    front = letterbox(416, "top-left", "bgr", 1.0)
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    images = frames("horses", 6, step=5)
    first = front.submit(images[:3])
    second = front.submit(images[3:])
    third = front.submit(images[:1])  # reuses the first slot
    for pending, batch in ((first, images[:3]), (second, images[3:]), (third, images[:1])):
        got = front.result(pending)
        for index, image in enumerate(batch):
            assert np.array_equal(got[index].numpy(), reference.tensor(image)[0])


def test_a_batch_is_one_to_max_batch_frames() -> None:
    front = letterbox(416, "top-left", "bgr", 1.0)
    image = frames("people", 1)[0]
    with pytest.raises(ValueError, match="1 to 4 frames, got 5"):
        front.submit([image] * 5)
    with pytest.raises(ValueError, match="got 0"):
        front.submit([])
    assert front.result(front.submit([image] * 4)).shape[0] == 4


def test_the_torch_backend_needs_a_torch_infer_node(caplog: pytest.LogCaptureFixture) -> None:
    from vapipe.pipeline.stage import StageContext
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    stage = PreprocessStage(
        "pre",
        PreprocessConfig(backend="torch", input_size=[416, 416], placement="top-left",
                         color="bgr", scale=1.0, workers=3),
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        stage.open(StageContext("pre"))
    assert 'pre: backend = "torch" needs a model on the torch backend (found none)' in caplog.text
    assert stage.front is None and stage.stats() == {"device": "numpy"}
    assert stage.workers == 3  # numpy's threads, as configured


def _stage_for(infer: object, backend: str = "auto"):  # type: ignore[no-untyped-def]
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    chosen, _ = PreprocessStage("pre", PreprocessConfig(backend=backend))._chosen_backend(infer)  # type: ignore[arg-type]
    return chosen


def test_auto_takes_torch_where_the_model_runs_on_a_torch_gpu(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import vapipe.stages.preprocess.stage as stage_module

    monkeypatch.setattr(stage_module, "_opencl_gpu_program", lambda dtype: "built")
    on = SimpleNamespace
    fp32 = on(dtype=np.float32)
    # torch's own device objects: their type strings are not the interned literals
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    # A model's torch_device: None where its backend is not torch.
    assert _stage_for(on(torch_device=cuda, input=fp32)) == "torch"
    # Torch on the CPU, or another backend: OpenCL on a GPU where its kernel builds ...
    assert _stage_for(on(torch_device=cpu, input=fp32)) == "opencl"
    assert _stage_for(on(torch_device=None, input=fp32)) == "opencl"
    assert _stage_for(None) == "opencl"
    # ... else numpy; and a named backend is what it names.
    monkeypatch.setattr(stage_module, "_opencl_gpu_program", lambda dtype: None)
    assert _stage_for(on(torch_device=cpu, input=fp32)) == "numpy"
    assert _stage_for(on(torch_device=cuda, input=fp32)) == "torch"
    assert _stage_for(on(torch_device=cuda), "opencl") == "opencl"
    assert _stage_for(None, "torch") == "torch"


def test_auto_never_takes_a_cpu_opencl_device(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """PoCL's CPU device is no faster than numpy: ``auto`` asks OpenCL for a GPU only, for
    the model's output type."""
    import vapipe.stages.preprocess.stage as stage_module

    asked = []

    def open_program(kind, platform, dtype):  # type: ignore[no-untyped-def]
        asked.append((kind, dtype))
        raise OpenCLUnavailable("no OpenCL GPU device")

    import vapipe.stages.preprocess.cl_kernel as stage_module_cl
    from vapipe.stages.cl_program import OpenCLUnavailable

    monkeypatch.setattr(stage_module_cl, "open_program", open_program)
    half = np.dtype(np.float16)
    assert stage_module._opencl_gpu_program(half) is None and asked == [("gpu", half)]
    built = object()
    monkeypatch.setattr(stage_module_cl, "open_program", lambda kind, platform, dtype: built)
    assert stage_module._opencl_gpu_program(half) is built


def test_as_batch_takes_a_device_batch_as_it_is_else_stacks() -> None:
    from vapipe.stages.infer.stage import as_batch

    batch = torch.arange(3 * 3 * 4 * 5, dtype=torch.float32).reshape(3, 3, 4, 5)
    whole = as_batch([batch[0], batch[1], batch[2]])
    assert whole.data_ptr() == batch.data_ptr() and torch.equal(whole, batch)  # no copy
    tail = as_batch([batch[1], batch[2]])
    assert tail.data_ptr() == batch[1].data_ptr() and torch.equal(tail, batch[1:])
    swapped = as_batch([batch[1], batch[0]])
    assert swapped.data_ptr() != batch.data_ptr() and torch.equal(swapped, batch[[1, 0]])
    gap = as_batch([batch[0], batch[2]])
    assert gap.data_ptr() != batch.data_ptr() and torch.equal(gap, batch[::2])
    other = torch.zeros(3, 4, 5)
    mixed = as_batch([batch[0], other])
    assert mixed.data_ptr() != batch.data_ptr() and torch.equal(mixed[1], other)
    sliced = batch[:, :, :2]  # views that are not contiguous are stacked
    stacked = as_batch([sliced[0], sliced[1]])
    assert stacked.is_contiguous() and torch.equal(stacked, sliced[:2])
    halves = batch.half()
    assert as_batch([batch[0], halves[1]]).dtype == torch.float32  # other dtype: stacked


def test_the_infer_node_detects_on_the_device_batch_and_lets_it_go() -> None:
    pytest.importorskip("onnx2torch")
    from fractions import Fraction

    from tests.stages.preprocess.test_yuv import i420_frames as planes_of
    from vapipe.pipeline.frame import Frame, StreamInfo
    from vapipe.pipeline.stage import StageContext
    from vapipe.stages.infer.stage import InferConfig, InferStage
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    infer = InferStage(
        "det",
        InferConfig(model="yolox-nano", max_batch=4, backend={"type": "torch", "device": "cpu",
                                                              "cache_dir": "off"}),
    )  # fmt: skip
    infer.open(StageContext("det"))
    runs = {}
    for backend in ("numpy", "torch"):
        stage = PreprocessStage("pre", PreprocessConfig(backend=backend))
        stage.bind(infer.model)
        stage.open(StageContext("pre"))
        assert stage.workers == 1 and stage.max_batch == (4 if backend == "torch" else 1)
        info = StreamInfo("cam", "people.mp4", 800, 450, Fraction(25))
        batch = [Frame("cam", i, i / 25, 0.0, None, info, yuv=p)  # type: ignore[arg-type]
                 for i, p in enumerate(planes_of("people", 3))]  # fmt: skip
        out = stage.process_batch(batch) + stage.flush()
        assert len(out) == 3
        if backend == "torch":
            storages = {f.tensor.untyped_storage().data_ptr() for f in out}
            assert isinstance(out[0].tensor, torch.Tensor) and len(storages) == 1  # one batch
        infer.process_batch(out)
        assert all((f.tensor is None) == (backend == "torch") for f in out)
        runs[backend] = [(f.detections.xyxy.tolist(), f.detections.class_id.tolist()) for f in out]
    assert sum(len(boxes) for boxes, _ in runs["numpy"]) >= 3
    assert runs["torch"] == runs["numpy"]
