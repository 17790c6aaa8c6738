"""Frames as I420 planes: one colour conversion (OpenCV's BT.601 arithmetic) for the numpy
path and the OpenCL kernel alike; tagged BT.709 and full-range pictures in their own colours."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import av
import cv2
import numpy as np
import pytest

from tests.conftest import asset
from tests.stages.preprocess.test_opencl import numpy_stage
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.preprocess.cl_kernel import TensorSpec
from vapipe.stages.preprocess.opencl import OpenCLLetterbox
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage
from vapipe.stages.source.opening import plain_i420
from vapipe.stages.source.stage import SourceConfig, VideoSource


def i420_frames(clip: str, count: int) -> list[np.ndarray]:
    with av.open(str(asset("media", f"{clip}.mp4"))) as container:
        decoded = (f.to_ndarray(format="yuv420p") for f in container.decode(video=0))
        return [planes for index, planes in enumerate(decoded) if index % 11 == 0][:count]


@pytest.mark.parametrize(
    ("size", "placement", "color", "scale"),
    [(416, "top-left", "bgr", 1.0), (640, "center", "rgb", 1 / 255)],
)
def test_i420_tensor_equals_opencv_conversion_then_the_bgr_path(
    device, size: int, placement: str, color: str, scale: float
) -> None:
    kernel = OpenCLLetterbox(
        TensorSpec(size, size, placement, color == "rgb", scale),
        max_batch=4,  # type: ignore[arg-type]
    )
    reference = numpy_stage(size, placement, color, scale)
    for clip in ("people", "traffic", "horses"):
        planes = i420_frames(clip, 3)
        bgr = [cv2.cvtColor(p, cv2.COLOR_YUV2BGR_I420) for p in planes]
        # A batch mixing both layouts: each frame is converted by its own launch.
        got = kernel.result(kernel.submit([planes[0], bgr[1], planes[2]]))
        for index, image in enumerate(bgr):
            expected, _ = reference.tensor(image)
            assert np.array_equal(got[index], expected), (clip, index)


def test_a_frame_makes_its_image_from_yuv_when_first_asked() -> None:
    planes = i420_frames("people", 1)[0]
    info = StreamInfo("cam", "clip.mp4", 800, 450, Fraction(25))
    frame = Frame("cam", 0, 0.0, 0.0, None, info, yuv=planes)  # type: ignore[arg-type]
    assert frame.shape == (450, 800, 3) and frame.__dict__["_image"] is None  # not made yet
    assert np.array_equal(frame.image, cv2.cvtColor(planes, cv2.COLOR_YUV2BGR_I420))
    assert frame.image is frame.image  # made once


@pytest.mark.parametrize("backend", ["numpy", "opencl"])
def test_a_source_hands_plain_pictures_over_as_i420_whatever_reads_them(
    device, backend: str
) -> None:
    # One colour conversion on every path: the numpy path reads Frame.image, made from the
    # planes with OpenCV's arithmetic, which the OpenCL kernel repeats.
    pre = PreprocessStage(
        "pre",
        PreprocessConfig(
            backend=backend, input_size=[416, 416], placement="top-left", color="bgr", scale=1.0
        ),
    )
    pre.open(StageContext("pre"))
    source = VideoSource("cam", SourceConfig(uri=str(asset("media", "people.mp4"))))
    source.open(StageContext("cam"))
    try:
        frame = next(item for item in source.frames() if isinstance(item, Frame))
        assert frame.yuv is not None and frame.yuv.shape == (675, 800)
        assert frame.__dict__["_image"] is None  # the source made no BGR copy
        assert source.stats()["frames_as_yuv420"] == 1
        expected, _ = numpy_stage(416, "top-left", "bgr", 1.0).tensor(
            cv2.cvtColor(frame.yuv, cv2.COLOR_YUV2BGR_I420)
        )
        [done] = [*pre.process_batch([frame]), *pre.flush()]
        assert np.array_equal(done.tensor, expected)
    finally:
        source.close()
        pre.close()


BARS_BGR = [(20, 200, 60), (250, 250, 250), (5, 5, 5), (30, 90, 220)]


def tagged_clip(path: Path, colorspace: int, color_range: int) -> Path:
    """Four colour bars, encoded with this matrix (1: BT.709, 5: BT.601) and range (1:
    limited, 2: full), and tagged so."""
    image = np.zeros((120, 160, 3), np.uint8)
    for index, colour in enumerate(BARS_BGR):
        image[:, index * 40 : (index + 1) * 40] = colour
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.codec_context.colorspace = colorspace
        stream.codec_context.color_range = color_range
        for _ in range(3):
            picture = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(
                format="yuv420p", dst_colorspace=colorspace, dst_color_range=color_range
            )
            picture.colorspace, picture.color_range = colorspace, color_range
            for packet in stream.encode(picture):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


@pytest.mark.parametrize(
    ("colorspace", "color_range"), [(1, 1), (1, 2), (5, 2)], ids=["bt709", "bt709-full", "full"]
)
def test_tagged_pictures_keep_their_colours_and_give_one_tensor_on_both_backends(
    device, tmp_path: Path, colorspace: int, color_range: int
) -> None:
    clip = tagged_clip(tmp_path / "tagged.mp4", colorspace, color_range)
    source = VideoSource("cam", SourceConfig(uri=str(clip)))
    source.open(StageContext("cam"))
    try:
        frame = next(item for item in source.frames() if isinstance(item, Frame))
    finally:
        source.close()
    assert frame.yuv is None, "not plain BT.601 limited range: converted by swscale"
    for index, colour in enumerate(BARS_BGR):
        got = frame.image[60, index * 40 + 20].astype(int)
        assert np.abs(got - colour).max() <= 6, (index, got, colour)
    spec = (160, "center", "rgb", 1 / 255)
    kernel = OpenCLLetterbox(TensorSpec(160, 160, "center", True, 1 / 255))
    expected, _ = numpy_stage(*spec).tensor(frame.image)
    assert np.array_equal(kernel.result(kernel.submit([frame.image]))[0], expected)


def picture(**overrides: object) -> SimpleNamespace:
    plain = {"format": SimpleNamespace(name="yuv420p"), "width": 800, "height": 450,
             "colorspace": 2, "color_range": 1, "rotation": 0}  # fmt: skip
    return SimpleNamespace(**{**plain, **overrides})


@pytest.mark.parametrize(
    ("overrides", "auto_rotate", "plain"),
    [
        ({}, True, True),
        ({"colorspace": 5}, True, True),  # BT.601 tagged
        ({"colorspace": 1}, True, False),  # BT.709: other coefficients
        ({"color_range": 2}, True, False),  # full range
        ({"format": SimpleNamespace(name="yuvj420p")}, True, False),
        ({"format": SimpleNamespace(name="nv12")}, True, False),
        ({"width": 801}, True, False),  # odd: chroma planes round up
        ({"rotation": 90}, True, False),  # turned upright on the host, as BGR
        ({"rotation": 90}, False, True),
    ],
)
def test_which_pictures_travel_as_i420(overrides: dict, auto_rotate: bool, plain: bool) -> None:
    assert plain_i420(picture(**overrides), auto_rotate) is plain


@pytest.mark.parametrize("unified", [True, False], ids=["unified-memory", "discrete-gpu"])
def test_both_staging_paths_take_decoder_planes_arrays_and_bgr(device, unified: bool) -> None:
    """A discrete GPU's path (host staging copied to a device buffer) and unified memory's
    (the buffer mapped and written): this machine's OpenCL runs either when told to."""
    from vapipe.stages.preprocess.cl_kernel import open_program
    from vapipe.stages.source.decoded import DecodedI420

    program = open_program("auto", None, np.dtype(np.float32))
    program.unified = unified
    kernel = OpenCLLetterbox(
        TensorSpec(416, 416, "top-left", False, 1.0), max_batch=3, depth=2, program=program
    )
    assert kernel.program is program
    reference = numpy_stage(416, "top-left", "bgr", 1.0)
    with av.open(str(asset("media", "traffic.mp4"))) as container:
        decoded = container.decode(video=0)
        pictures = [next(decoded) for _ in range(7)]
    arrays = [p.to_ndarray(format="yuv420p") for p in pictures]
    expected = [reference.tensor(cv2.cvtColor(a, cv2.COLOR_YUV2BGR_I420))[0] for a in arrays]
    bgr = cv2.cvtColor(arrays[6], cv2.COLOR_YUV2BGR_I420)
    batches = [  # three in flight over two slots, each its own mix and count
        [DecodedI420(pictures[0]), arrays[1], DecodedI420(pictures[2])],
        [DecodedI420(pictures[3])],
        [arrays[4], DecodedI420(pictures[5]), bgr],
    ]
    firsts = [0, 3, 4]
    pending = [kernel.submit(batches[0]), kernel.submit(batches[1])]
    got = [kernel.result(pending[0]).copy()]
    pending.append(kernel.submit(batches[2]))
    got += [kernel.result(p).copy() for p in pending[1:]]
    for first, batch, tensors in zip(firsts, batches, got, strict=True):
        assert tensors.shape[0] >= len(batch)
        for index in range(len(batch)):
            assert np.array_equal(tensors[index], expected[first + index]), (first, index)
