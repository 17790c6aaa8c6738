"""The OpenCL crop kernel (PoCL's CPU device in CI) against the numpy path on real frames:
the same model input within one level of a pixel, from BGR images and from decoded I420
planes, in both layouts; and how a node falls back to numpy."""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.conftest import asset, opencl_device, skip_without_opencl
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages import cl_program
from vapipe.stages.cl_program import OpenCLUnavailable
from vapipe.stages.crops import opencl as cl_crops
from vapipe.stages.crops.opencl import CropProgram, OpenCLCrops, open_crops
from vapipe.stages.crops.warp import (
    PAD,
    CropRule,
    Fit,
    Normalise,
    crop_box,
    cut,
    cut_i420,
    warp_matrix,
    window_of,
)
from vapipe.stages.source.decoded import DecodedI420

IMAGENET = Normalise("rgb", 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
RAW_BGR = Normalise("bgr", 1.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))


@pytest.fixture(scope="module")
def program() -> CropProgram:
    skip_without_opencl()
    opencl_device()
    return CropProgram()


def pictures(clip: str, count: int) -> list[tuple[np.ndarray, np.ndarray, DecodedI420]]:
    """(BGR image, I420 array, the decoder's planes) of every 11th frame."""
    found = []
    with av.open(str(asset("media", clip))) as container:
        for index, frame in enumerate(container.decode(video=0)):
            if index % 11 == 0:
                bgr, yuv = frame.to_ndarray(format="bgr24"), frame.to_ndarray(format="yuv420p")
                found.append((bgr, yuv, DecodedI420(frame)))
            if len(found) == count:
                break
    return found


def random_crops(
    rng: np.random.Generator, width: int, height: int, size: tuple[int, int], fit: Fit, count: int
) -> list[tuple[np.ndarray, tuple[int, int, int, int] | None]]:
    """(matrix, window) of boxes anywhere, partly outside the frame too."""
    crops = []
    for _ in range(count):
        x1, y1 = rng.uniform(-60, width - 20), rng.uniform(-60, height - 20)
        box = np.array([x1, y1, x1 + rng.uniform(8, 420), y1 + rng.uniform(8, 420)])
        rect = crop_box(box, CropRule(margin=0.15, fit=fit))
        matrix = warp_matrix(rect, size, fit)
        crops.append((matrix, window_of(rect, matrix, size) if fit == "letterbox" else None))
    return crops


@pytest.mark.parametrize("clip", ["people.mp4", "traffic.mp4"])
@pytest.mark.parametrize(
    ("size", "fit", "channels_last", "normalise", "level"),
    [
        ((128, 256), "stretch", True, RAW_BGR, 1.0),  # Intel re-id: NHWC, BGR 0-255
        (
            (112, 112),
            "square",
            False,
            IMAGENET,
            1 / 255 / 0.224,
        ),  # ImageNet mean/std; std 0.224 the finest
        ((96, 64), "letterbox", False, IMAGENET, 1 / 255 / 0.224),
    ],
)
def test_the_kernel_gives_the_numpy_input_within_one_level(
    program: CropProgram,
    clip: str,
    size: tuple[int, int],
    fit: Fit,
    channels_last: bool,
    normalise: Normalise,
    level: float,
) -> None:
    frames = pictures(clip, 3)
    height, width = frames[0][0].shape[:2]
    rng = np.random.default_rng(len(clip) + size[0])
    kernel = OpenCLCrops(size, normalise, channels_last, program)
    # Frames as BGR, as I420 arrays and as decoder planes: one upload of nine pictures of
    # three kinds, and crops of any of them in any order.
    held = [image for image, _, _ in frames] + [yuv for _, yuv, _ in frames]
    held += [planes for _, _, planes in frames]
    crops, expected = [], []
    for matrix, window in random_crops(rng, width, height, size, fit, 30):
        index = int(rng.integers(0, len(held)))
        crops.append((index, matrix, window))
        if index < 3:
            expected.append(cut(held[index], matrix, size, window))
        else:
            expected.append(cut_i420(frames[index % 3][1], matrix, size, window))
    reference = normalise.apply(np.stack(expected))
    if not channels_last:
        reference = reference.transpose(0, 3, 1, 2)
    got = kernel.inputs(held, crops)
    assert got.shape == reference.shape and got.dtype == np.float32
    difference = np.abs(got - reference)
    assert difference.max() <= level * 1.001, difference.max()
    assert (difference > 1e-5).mean() < 1e-3  # a level apart only where rounding ties
    # Again with one picture and one crop: the buffers grown for the batch are reused.
    first, matrix, window = crops[0]
    np.testing.assert_array_equal(kernel.inputs([held[first]], [(0, matrix, window)])[0], got[0])


def test_outside_the_frame_and_the_window_is_grey(program: CropProgram) -> None:
    image = np.full((40, 60, 3), 200, np.uint8)
    size = (32, 32)
    rect = np.array([50.0, -30, 90, 10])  # mostly outside, letterboxed (wider than high)
    matrix = warp_matrix(rect, size, "letterbox")
    window = window_of(rect, matrix, size)
    got = OpenCLCrops(size, RAW_BGR, True, program).inputs([image], [(0, matrix, window)])[0]
    expected = cut(image, matrix, size, window).astype(np.float32)
    assert np.abs(got - expected).max() <= 1
    assert (got[: window[1]] == PAD).all() and (got[window[3] :] == PAD).all()
    assert (got[window[1] : window[3], :, :] == 200).any()  # the part inside the frame


def test_opencl_without_a_device_warns_and_cuts_with_numpy(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def none(kind: str = "auto", platform: str | None = None) -> list[Any]:
        raise OpenCLUnavailable("no OpenCL device")

    monkeypatch.setattr(cl_program, "candidate_devices", none)
    with caplog.at_level(logging.INFO):
        assert open_crops("opencl", (8, 8), RAW_BGR, False, "kind") is None
        assert open_crops("auto", (8, 8), RAW_BGR, False, "kind") is None
        assert open_crops("numpy", (8, 8), RAW_BGR, False, "kind") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "kind: OpenCL unavailable for crops (no OpenCL device); cutting them with numpy"
    ]
    assert 'kind: crops = "auto" picks numpy (no OpenCL GPU: no OpenCL device)' in caplog.text


def test_auto_asks_for_a_gpu_and_opencl_for_any_device(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    class Recorded:
        def __init__(self, kind: str) -> None:
            asked.append(kind)

        def describe(self) -> str:
            return "a device"

    monkeypatch.setattr(cl_crops, "CropProgram", Recorded)
    made = open_crops("auto", (8, 4), RAW_BGR, True, "kind")
    open_crops("opencl", (8, 4), RAW_BGR, True, "kind")
    assert asked == ["gpu", "auto"]
    assert isinstance(made, OpenCLCrops) and made.size == (8, 4) and made.channels_last


def test_a_frame_s_picture_is_its_decoded_planes_until_its_image_is_made() -> None:
    from vapipe.stages.crops.cutter import frame_picture

    [(_, _, planes)] = pictures("people.mp4", 1)
    info = StreamInfo("cam", "people.mp4", 800, 450, Fraction(25))
    frame = Frame("cam", 0, 0.0, 0.0, None, info, planes=planes)  # type: ignore[arg-type]
    assert frame_picture(frame) is planes
    image = frame.image  # made now: a crop reads it rather than converting again
    assert frame_picture(frame) is image
    bgr = np.zeros((4, 6, 3), np.uint8)
    assert frame_picture(Frame("cam", 0, 0.0, 0.0, bgr, info)) is bgr


def test_a_kernel_that_fails_at_run_time_leaves_the_node_on_numpy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.object_models import brightness_classifier
    from vapipe.pipeline.detections import Detections
    from vapipe.stages.objects.classify import ClassifyStage
    from vapipe.stages.objects.config import ClassifyConfig

    class Failing:
        calls = 0

        def inputs(self, pictures: Any, crops: Any) -> np.ndarray:
            Failing.calls += 1
            raise RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES\nmore text")

    model = brightness_classifier(tmp_path / "brightness.onnx")
    stage = ClassifyStage("kind", ClassifyConfig(model=str(model), attempts=1, min_attempts=1))
    stage.loaded_model()
    stage.cropper.device = Failing()  # type: ignore[assignment]
    info = StreamInfo("cam", "x.mp4", 64, 48, Fraction(25))

    def frame(seq: int, grey: int) -> Frame:
        dets = Detections(
            np.array([[10, 8, 50, 40]], np.float32), np.array([0.9], np.float32),
            np.array([0], np.int32), ("car",), np.array([seq + 1], np.int64),
        )  # fmt: skip
        image = np.full((48, 64, 3), grey, np.uint8)
        return Frame("cam", seq, seq / 25, 0.0, image, info, detections=dets)

    caplog.clear()  # what loading the model logged
    with caplog.at_level(logging.WARNING):
        done = stage.process_batch([frame(0, 230), frame(1, 20)])
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "kind: the OpenCL crop kernel failed (clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES); "
        "cutting crops with numpy from now on"
    ]
    assert stage.cropper.device is None and Failing.calls == 1
    assert stage.counts["crops"] == 2 and stage.counts["failed"] == 0
    labels = [f.detections.attributes[0]["kind"].label for f in done]  # type: ignore[union-attr,index]
    assert labels == ["light", "dark"]
    stage.close()


def test_the_device_buffers_are_kept_while_big_enough_and_doubled_when_not(
    program: CropProgram,
) -> None:
    kernel = OpenCLCrops((16, 16), RAW_BGR, False, program)
    image = np.zeros((40, 60, 3), np.uint8)
    crop = (0, warp_matrix(np.array([0.0, 0.0, 20, 20]), (16, 16), "stretch"), None)
    kernel.inputs([image], [crop])
    first_src, first_out = kernel._src, kernel._out
    assert (kernel._src_bytes, kernel._out_bytes) == (image.nbytes, 16 * 16 * 3 * 4)
    kernel.inputs([image[:20]], [crop])  # less: the same buffers
    assert kernel._src is first_src and kernel._out is first_out
    kernel.inputs([image], [crop] * 3)  # three crops: twice the output or what is needed
    assert kernel._src is first_src and kernel._out is not first_out
    assert kernel._out_bytes == 3 * 16 * 16 * 3 * 4
    kernel.inputs([image, image], [crop])  # 2 frames: double, as that is as much
    assert kernel._src_bytes == 2 * image.nbytes


def test_a_device_whose_kernel_does_not_build_is_passed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Device:
        def __init__(self, name: str) -> None:
            self.name = f" {name} "

    broken, good = Device("broken"), Device("good")
    tried: list[Any] = []

    def build(self: CropProgram, device: Any) -> None:
        tried.append(device)
        if device is broken:
            raise OpenCLUnavailable("crop kernel did not build: no")

    monkeypatch.setattr(cl_crops, "pyopencl_module", lambda: None)
    monkeypatch.setattr(cl_program, "candidate_devices", lambda kind, platform: [broken, good])
    monkeypatch.setattr(CropProgram, "_build", build)
    assert CropProgram().device is good and tried == [broken, good]
    monkeypatch.setattr(cl_program, "candidate_devices", lambda kind, platform: [broken, broken])
    with pytest.raises(OpenCLUnavailable, match=r"^broken: crop kernel did not build: no; broken"):
        CropProgram()
