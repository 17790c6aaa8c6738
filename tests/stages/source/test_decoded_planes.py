"""Plain 4:2:0 pictures stay in their decoder's planes until read: ``Frame.yuv`` is made from
them on first read, and a device front end copies them once, straight into its staging
memory, to the same bytes as PyAV's ``to_ndarray``; rows padded to the decoder's line size are
skipped."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import av
import cv2
import numpy as np
import pytest

from tests.conftest import asset
from vapipe.pipeline.frame import Frame, StreamInfo, contiguous, copy_picture
from vapipe.pipeline.stage import StageContext
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage
from vapipe.stages.source.decoded import DecodedI420
from vapipe.stages.source.stage import SourceConfig, VideoSource

INFO = StreamInfo("cam", "clip.mp4", 800, 450, Fraction(25))


def pictures(clip: str, count: int) -> list[av.VideoFrame]:
    with av.open(str(asset("media", f"{clip}.mp4"))) as container:
        decoded = container.decode(video=0)
        return [next(decoded) for _ in range(count)]


def padded_picture(width: int, height: int) -> av.VideoFrame:
    """A yuv420p picture whose rows are padded past its width (FFmpeg aligns line sizes)."""
    rng = np.random.default_rng(width)
    planes = rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    picture = av.VideoFrame.from_ndarray(planes, format="yuv420p")
    return picture.reformat(width=width, height=height)  # a frame with FFmpeg's own buffers


class Counting(DecodedI420):
    __slots__ = ("arrays",)

    def __init__(self, picture: av.VideoFrame) -> None:
        super().__init__(picture)
        self.arrays = 0

    def to_array(self) -> np.ndarray:
        self.arrays += 1
        return super().to_array()


@pytest.mark.parametrize("clip", ["people", "traffic", "horses"])
def test_planes_copied_into_staging_are_the_i420_array(clip: str) -> None:
    for picture in pictures(clip, 3):
        planes = DecodedI420(picture)
        expected = picture.to_ndarray(format="yuv420p")
        assert planes.shape == expected.shape and planes.nbytes == expected.nbytes
        staging = np.full(planes.nbytes + 7, 99, np.uint8)
        copy_picture(planes, staging[3 : 3 + planes.nbytes])
        assert np.array_equal(staging[3 : 3 + planes.nbytes], expected.reshape(-1))
        assert (staging[:3] == 99).all() and (staging[-4:] == 99).all()  # nothing outside
        assert np.array_equal(planes.to_array(), expected)


@pytest.mark.parametrize(
    ("width", "height", "padded"),
    [(802, 452, True), (66, 10, True), (1922, 6, True), (128, 8, False)],
)
def test_rows_padded_to_the_line_size_are_skipped(width: int, height: int, padded: bool) -> None:
    picture = padded_picture(width, height)
    lines = [(plane.line_size, plane.width) for plane in picture.planes]
    assert any(line > cols for line, cols in lines) == padded
    planes = Counting(picture)
    out = np.empty(width * height * 3 // 2, np.uint8)
    planes.copy_into(out)
    assert np.array_equal(out, picture.to_ndarray(format="yuv420p").reshape(-1))
    assert planes.arrays == 0  # straight from the planes, not through PyAV's array


def test_a_bottom_up_plane_is_copied_through_pyav_s_own_array() -> None:
    """A negative line size (rows stored last to first) is not what decoders give; such a
    picture goes through ``to_ndarray``, which knows the layout."""
    array = np.arange(6 * 4, dtype=np.uint8).reshape(6, 4)  # a 4 x 4 picture's I420 rows
    upside_down = SimpleNamespace(
        width=4, height=4, planes=[SimpleNamespace(height=4, width=4, line_size=-4)],
        to_ndarray=lambda format: array,
    )  # fmt: skip
    planes = DecodedI420(upside_down)
    out = np.zeros(24, np.uint8)
    planes.copy_into(out)
    assert np.array_equal(out, array.reshape(-1))
    assert np.array_equal(planes.luma(), array[:4])


@pytest.mark.parametrize(("width", "height"), [(802, 452), (66, 10), (128, 8)])
def test_the_luma_plane_is_read_in_the_decoder_s_buffer(width: int, height: int) -> None:
    picture = padded_picture(width, height)
    planes = Counting(picture)
    luma = planes.luma()
    expected = picture.to_ndarray(format="yuv420p")[:height]
    assert luma.shape == (height, width) and np.array_equal(luma, expected)
    assert planes.arrays == 0 and not luma.flags.writeable  # a view of the decoder's plane
    assert luma.strides == (picture.planes[0].line_size, 1)
    frame = Frame("cam", 0, 0.0, 0.0, None, INFO, planes=planes)  # type: ignore[arg-type]
    assert np.array_equal(frame.luma(), expected) and planes.arrays == 0
    assert frame.__dict__.get("_yuv") is None  # the frame's array is still not made
    made = frame.yuv  # once made, the luma is the array's first rows
    assert made is not None and np.shares_memory(frame.luma(), made)
    assert np.array_equal(frame.luma(), expected)


def test_a_frame_without_an_i420_picture_has_no_luma() -> None:
    image = np.zeros((8, 8, 3), np.uint8)
    assert Frame("cam", 0, 0.0, 0.0, image, INFO).luma() is None


def test_a_frame_makes_yuv_from_its_planes_only_when_read_and_once() -> None:
    [picture] = pictures("people", 1)
    planes = Counting(picture)
    frame = Frame("cam", 0, 0.0, 0.0, None, INFO, planes=planes)  # type: ignore[arg-type]
    assert frame.shape == (450, 800, 3) and frame.i420() is planes and planes.arrays == 0
    assert all(type(size) is int for size in frame.shape)
    assert contiguous(planes) is planes  # planes are not arrays: handed on as they are
    array = frame.yuv
    assert array is not None and np.array_equal(array, picture.to_ndarray(format="yuv420p"))
    assert frame.yuv is array and frame.i420() is array and planes.arrays == 1
    assert frame.image.shape == (450, 800, 3) and planes.arrays == 1
    frame.image = np.zeros((45, 80, 3), np.uint8)  # a stage's own picture: its shape wins
    assert frame.shape == (45, 80, 3)
    frame.yuv = None  # let go: the decoder's planes go with the array
    assert frame.i420() is None and "_planes" not in frame.__dict__


def test_a_frame_let_go_before_its_planes_were_read_drops_them() -> None:
    [picture] = pictures("people", 1)
    frame = Frame("cam", 0, 0.0, 0.0, None, INFO, planes=DecodedI420(picture))  # type: ignore[arg-type]
    frame.yuv = None
    assert frame.yuv is None and frame.i420() is None


def test_the_source_hands_plain_pictures_over_in_their_planes() -> None:
    source = VideoSource("cam", SourceConfig(uri=str(asset("media", "people.mp4"))))
    source.open(StageContext("cam"))
    try:
        frame = next(item for item in source.frames() if isinstance(item, Frame))
    finally:
        source.close()
    held = frame.i420()
    assert isinstance(held, DecodedI420) and held.shape == (675, 800)
    assert source.stats()["frames_as_yuv420"] == 1


def test_a_device_front_takes_the_planes_without_an_array_being_made() -> None:
    torch = pytest.importorskip("torch")
    from vapipe.stages.preprocess.torch_letterbox import TorchLetterbox

    pre = PreprocessStage("pre", PreprocessConfig(input_size=[416, 416], placement="top-left",
                                                  color="bgr", scale=1.0))  # fmt: skip
    pre.open(StageContext("pre"))
    pre.front = TorchLetterbox(pre._spec(), torch, torch.device("cpu"), max_batch=4)
    pre.max_batch = 4
    decoded = pictures("traffic", 3)
    counting = [Counting(p) for p in decoded]
    batch = [Frame("cam", i, i / 25, 0.0, None, INFO, planes=c)  # type: ignore[arg-type]
             for i, c in enumerate(counting)]  # fmt: skip
    done = [*pre.process_batch(batch), *pre.flush()]
    assert [c.arrays for c in counting] == [0, 0, 0]  # copied from the planes only
    reference = PreprocessStage("ref", PreprocessConfig(input_size=[416, 416],
                                placement="top-left", color="bgr", scale=1.0))  # fmt: skip
    reference.open(StageContext("ref"))
    for frame, picture in zip(done, decoded, strict=True):
        bgr = cv2.cvtColor(picture.to_ndarray(format="yuv420p"), cv2.COLOR_YUV2BGR_I420)
        expected, box = reference.tensor(bgr)
        assert np.array_equal(frame.tensor.numpy(), expected)
        assert frame.letterbox == box
