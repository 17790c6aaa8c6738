"""The redact node on pictures a hardware decoder left in GPU memory (NV12 tensors; here on
torch's CPU device, the same code as on CUDA): the regions are hidden on the tensor before
any download, the frame passed on carries the new picture and no original pixels, the
decoder's picture is left as it was, and what comes out matches the host path."""

from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest

from tests.stages.redact.test_stage import frame, stage
from vapipe.pipeline.device_picture import DeviceNV12, i420_to_nv12
from vapipe.stages.media.redaction_nv12 import even_box, yuv_of

torch = pytest.importorskip("torch")


def on_device(host: object) -> object:
    """The same frame with its picture as an NV12 tensor instead of a host image."""
    made = host  # a Frame from test_stage.frame: textured image, detections
    i420 = cv2.cvtColor(made.image, cv2.COLOR_BGR2YUV_I420)  # type: ignore[attr-defined]
    picture = DeviceNV12(torch.from_numpy(i420_to_nv12(i420)), None, 0, Fraction(1, 25))
    made.__dict__.pop("_image", None)  # type: ignore[attr-defined]
    made.__dict__["_planes"] = picture  # type: ignore[attr-defined]
    return made


def bgr(picture: DeviceNV12) -> np.ndarray:
    return cv2.cvtColor(picture.to_array(), cv2.COLOR_YUV2BGR_I420)


@pytest.mark.parametrize("method", ["fill", "pixelate", "blur"])
def test_a_device_picture_is_hidden_on_the_device_like_on_the_host(method: str) -> None:
    boxes, classes = [[20, 10, 60, 70], [101, 21, 151, 71]], [0, 1]
    host_in = frame(boxes, classes)
    host_in.image = cv2.cvtColor(cv2.cvtColor(host_in.image, cv2.COLOR_BGR2YUV_I420),
                                 cv2.COLOR_YUV2BGR_I420)  # fmt: skip
    original = host_in.image.copy()
    device_in = on_device(frame(boxes, classes))
    decoded = device_in.i420()  # type: ignore[attr-defined]
    before = decoded.tensor.clone()

    node = stage(classes=["person", "car"], method=method, grow=0.0, color=[200, 40, 10])
    (host_out,) = node.process(host_in)
    (device_out,) = node.process(device_in)

    picture = device_out.i420()
    assert isinstance(picture, DeviceNV12) and picture is not decoded
    assert not device_out.image_made() and device_out.__dict__.get("_yuv") is None
    assert torch.equal(decoded.tensor, before)  # the decoder's picture untouched
    assert node.stats()["on_device"] == 1
    shown = bgr(picture)
    for x0, y0, x1, y1 in ((20, 10, 60, 70), (102, 22, 150, 70)):
        region, host_region = shown[y0:y1, x0:x1].astype(int), host_out.image[y0:y1, x0:x1]
        assert np.abs(region - original[y0:y1, x0:x1].astype(int)).mean() > 20  # hidden
        assert np.abs(region - host_region.astype(int)).mean() < 12  # as the host hides it
    # outside the regions (2 pixels of chroma margin): the picture as decoded
    assert np.abs(shown[80:, :].astype(int) - original[80:, :].astype(int)).max() <= 2
    assert np.abs(shown[:, 64:98].astype(int) - original[:, 64:98].astype(int)).max() <= 2


def test_a_polygon_is_hidden_through_its_mask_on_the_device() -> None:
    node = stage(areas=[{"polygon": [[10, 10], [110, 10], [10, 90]]}], method="fill",
                 color=[255, 0, 0])  # fmt: skip
    device_in = on_device(frame([], []))
    original = bgr(device_in.i420())  # type: ignore[attr-defined]
    (device_out,) = node.process(device_in)
    shown = bgr(device_out.i420())
    assert abs(int(shown[20, 20, 2]) - 255) < 12 and shown[20, 20, 0] < 20  # red, inside
    assert np.abs(shown[85, 100].astype(int) - original[85, 100].astype(int)).max() <= 2


def test_even_boxes_and_the_colour_as_opencv_converts_it() -> None:
    assert even_box(np.array([3.2, 5.0, 9.1, 10.0]), 100, 50) == (2, 4, 10, 10)
    assert even_box(np.array([-3, -3, 200, 200]), 100, 50) == (0, 0, 100, 50)
    assert even_box(np.array([100, 10, 120, 20]), 100, 50) is None
    y, u, v = yuv_of((0, 0, 255))  # red
    assert y == 82 and u < 128 < v
