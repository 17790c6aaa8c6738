"""The one crop library's cutter, as the object nodes and the tracker's appearance use it: a
crop's warp by the node's rule, the crops of a batch cut with numpy (one that fails left out
and counted, the others kept in order) or on a device (each frame uploaded once), the device
given up for numpy after it fails, and a model run in chunks of its batch sizes."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.crops.cutter import Crop, Cropper, frame_cut, run_in_chunks
from vapipe.stages.crops.warp import CropRule, Normalise, crop_box, warp_matrix, window_of

INFO = StreamInfo("cam", "cam.mp4", 64, 48, None)


class Model:
    """A stand-in crop model: 16 x 8 input, its "tensor" the crops as float32."""

    size = (16, 8)
    normalise = Normalise("bgr", 1.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    channels_last = True

    def tensor(self, crops: np.ndarray) -> np.ndarray:
        return crops.astype(np.float32)


class Device:
    """A stand-in OpenCL front end: records what it is given."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, []

    def inputs(self, pictures: list[Any], crops: list[Any]) -> np.ndarray:
        if self.fail:
            raise RuntimeError("CL_OUT_OF_RESOURCES\nmore")
        self.calls.append((pictures, crops))
        return np.zeros((len(crops), 8, 16, 3), np.float32)


def frame(seed: int) -> Frame:
    image = np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return Frame("cam", seed, 0.0, 0.0, image, INFO)


def cropper(fit: str = "letterbox") -> Cropper:
    return Cropper("node", Model(), CropRule(margin=0.1, fit=fit), "numpy")  # type: ignore[arg-type]


BOX = np.array([10.0, 5.0, 30.0, 40.0], np.float32)


@pytest.mark.parametrize("fit", ["letterbox", "square", "stretch"])
def test_a_crop_is_placed_by_the_nodes_rule(fit: str) -> None:
    cut = cropper(fit)
    matrix, window = cut.warp(BOX)
    rect = crop_box(BOX, CropRule(margin=0.1, fit=fit))  # type: ignore[arg-type]
    assert np.array_equal(matrix, warp_matrix(rect, (16, 8), fit))  # type: ignore[arg-type]
    if fit == "letterbox":
        assert window == window_of(rect, matrix, (16, 8)) and window != (0, 0, 16, 8)
    else:
        assert window is None


def test_numpy_cuts_each_crop_and_leaves_out_one_that_fails() -> None:
    cut = cropper()
    first, second = frame(1), frame(2)
    good = Crop(first, *cut.warp(BOX))
    bad = Crop(second, np.zeros((3, 3)), None)  # not a 2 x 3 warp: OpenCV refuses it
    other = Crop(second, *cut.warp(BOX + 4))
    kept, batch = cut.inputs([good, bad, other])
    assert kept == [0, 2] and cut.failed == 1
    assert batch.shape == (2, 8, 16, 3) and batch.dtype == np.float32
    assert np.array_equal(batch[0], frame_cut(first, good.matrix, (16, 8), good.window))
    assert np.array_equal(batch[1], frame_cut(second, other.matrix, (16, 8), other.window))
    nothing, empty = cut.inputs([])
    assert nothing == [] and empty.size == 0


def test_on_a_device_each_frame_is_uploaded_once() -> None:
    cut = cropper()
    device = Device()
    cut.device = device  # type: ignore[assignment]
    one, two = frame(1), frame(2)
    crops = [Crop(one, *cut.warp(BOX)), Crop(two, *cut.warp(BOX)), Crop(one, *cut.warp(BOX + 2))]
    kept, batch = cut.inputs(crops)
    assert kept == [0, 1, 2] and batch.shape == (3, 8, 16, 3)
    ((pictures, placed),) = device.calls
    assert len(pictures) == 2 and pictures[0] is one.image and pictures[1] is two.image
    assert [index for index, _, _ in placed] == [0, 1, 0]
    assert placed[2][1] is crops[2].matrix and placed[2][2] == crops[2].window


def test_a_device_that_fails_is_given_up_for_numpy_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cut = cropper()
    cut.device = Device(fail=True)  # type: ignore[assignment]
    crop = Crop(frame(3), *cut.warp(BOX))
    with caplog.at_level(logging.WARNING):
        kept, batch = cut.inputs([crop])
        cut.inputs([crop])
    assert kept == [0] and cut.device is None
    assert np.array_equal(batch[0], frame_cut(crop.frame, crop.matrix, (16, 8), crop.window))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "node: the OpenCL crop kernel failed (CL_OUT_OF_RESOURCES); cutting crops with numpy "
        "from now on"
    ]


def test_a_model_runs_in_chunks_of_its_batch_sizes_in_order() -> None:
    seen: list[int] = []

    def run(batch: np.ndarray) -> np.ndarray:
        seen.append(len(batch))
        return batch * 2

    out = run_in_chunks(run, np.arange(10, dtype=np.float32)[:, None], 4)
    assert seen == [4, 4, 2]
    assert out[:, 0].tolist() == [2 * v for v in range(10)]


def test_a_frame_with_i420_is_cut_from_its_planes_without_making_its_whole_image() -> None:
    import cv2

    from vapipe.stages.crops.cutter import frame_picture

    bgr = np.random.default_rng(5).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    yuv = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    converted = cv2.cvtColor(yuv, cv2.COLOR_YUV2BGR_I420)
    decoded = Frame("cam", 0, 0.0, 0.0, None, INFO, yuv=yuv)  # type: ignore[arg-type]
    cut = cropper()
    matrix, window = cut.warp(BOX)
    crop = frame_cut(decoded, matrix, (16, 8), window)
    assert not decoded.image_made(), "the whole picture was converted for one crop"
    assert np.array_equal(crop, frame_cut(Frame("cam", 0, 0.0, 0.0, converted, INFO), matrix,
                                          (16, 8), window))  # fmt: skip
    assert frame_picture(decoded) is decoded.i420()
    image = decoded.image  # made now: crops read it rather than converting again
    assert frame_picture(decoded) is image
    assert np.array_equal(frame_cut(decoded, matrix, (16, 8), window), crop)
    plain = frame(7)
    assert frame_picture(plain) is plain.image


def test_a_crop_is_fixed_once_made() -> None:
    import dataclasses

    crop = Crop(frame(1), np.eye(2, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        crop.window = (0, 0, 1, 1)  # type: ignore[misc]
