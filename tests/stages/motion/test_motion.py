"""The motion gate: a frame where nothing moved is flagged for the detector to skip."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.stages.media.draw import annotate
from vapipe.stages.motion.stage import MotionConfig, MotionStage


def picture(box_x: int | None = None, size: int = 40, shade: int = 120) -> np.ndarray:
    image = np.full((360, 640, 3), shade, np.uint8)
    if box_x is not None:
        image[100 : 100 + size, box_x : box_x + size] = 250
    return image


def frame(source: str, seq: int, image: np.ndarray, fps: float = 25) -> Frame:
    info = StreamInfo(source, "x", image.shape[1], image.shape[0], None)
    return Frame(source, seq, seq / fps, 0.0, image, info)


def gate(**config: object) -> MotionStage:
    stage = MotionStage("motion", MotionConfig.model_validate(config))
    stage.open(None)  # type: ignore[arg-type]
    return stage


def flags(stage: MotionStage, frames: list[Frame]) -> list[bool]:
    return [stage.process(f)[0].predicted for f in frames]


def test_a_still_picture_is_skipped_until_something_moves() -> None:
    stage = gate()
    images = [picture(100)] * 5 + [picture(100 + 12 * k) for k in range(1, 4)] + [picture(136)] * 3
    skipped = flags(stage, [frame("cam", i, im) for i, im in enumerate(images)])
    assert skipped == [False, True, True, True, True, False, False, False, True, True, True]
    assert stage.stats() == {"moving_frames": 4, "still_frames": 7}


def test_a_still_frame_says_so_for_the_tracker() -> None:
    stage = gate()
    stage.process(frame("cam", 0, picture(100)))
    (out,) = stage.process(frame("cam", 1, picture(100)))
    assert out.predicted and out.motion is not None and out.motion.still is True


def test_small_or_faint_changes_are_not_motion() -> None:
    stage = gate(threshold=15, min_area=0.002)
    base = picture(None)
    speck = picture(None)
    speck[200:204, 300:304] = 250  # 16 px of 230,400: well under 0.2% of the picture
    faint = picture(None, shade=128)  # every pixel, but by 8 grey levels
    assert flags(stage, [frame("cam", i, im) for i, im in enumerate([base, speck, faint])]) == [
        False, True, True,
    ]  # fmt: skip


def test_a_still_picture_is_detected_again_after_max_skip_s() -> None:
    stage = gate(max_skip_s=1.0)
    skipped = flags(stage, [frame("cam", i, picture(100), fps=4) for i in range(9)])
    # 4 frames a second: detected at 0, 1, 2 s.
    assert [i for i, s in enumerate(skipped) if not s] == [0, 4, 8]
    never = gate(max_skip_s=0)
    assert sum(not s for s in flags(never, [frame("c", i, picture(5)) for i in range(80)])) == 1


def test_sources_are_compared_with_their_own_previous_frame() -> None:
    stage = gate()
    out = [stage.process(frame(s, i, picture(100 if s == "a" else 400)))[0].predicted
           for i in range(3) for s in "ab"]  # fmt: skip
    assert out == [False, False, True, True, True, True]


def test_a_source_that_comes_back_starts_over() -> None:
    stage = gate()
    flags(stage, [frame("cam", i, picture(100)) for i in range(3)])
    stage.handle_message(Message("cam", "source_up", 0.0))
    assert flags(stage, [frame("cam", 3, picture(100))]) == [False]


def test_the_luma_of_a_yuv_frame_is_used_as_it_is() -> None:
    stage = gate()
    image = picture(100)
    yuv = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
    frames = []
    for seq in range(3):
        f = frame("cam", seq, image)
        f.__dict__["_image"] = None
        f.yuv = yuv if seq < 2 else cv2.cvtColor(picture(300), cv2.COLOR_BGR2YUV_I420)
        frames.append(f)
    assert flags(stage, frames) == [False, True, False]
    assert all(f.__dict__.get("_image") is None for f in frames)  # no BGR picture was made


def test_change_inside_an_ignored_polygon_is_not_motion() -> None:
    # A flickering screen at the right: ignored in pixels, or as fractions of the frame.
    flicker = [picture(None), picture(None)]
    flicker[1][50:300, 500:620] = 250
    walker = picture(None)
    walker[50:300, 500:620] = 250
    walker[150:250, 100:160] = 0  # and then someone moves at the left
    for ignore, normalized in (([[480, 0], [640, 0], [640, 360], [480, 360]],), False), (
        ([[0.75, 0], [1, 0], [1, 1], [0.75, 1]],), True,
    ):  # fmt: skip
        stage = gate(ignore=list(ignore), normalized=normalized)
        frames = [frame("cam", i, im) for i, im in enumerate([*flicker, walker])]
        assert flags(stage, frames) == [False, True, False], normalized
    plain = gate()
    assert flags(plain, [frame("cam", i, im) for i, im in enumerate(flicker)]) == [False, False]


def test_min_area_is_a_share_of_the_watched_part() -> None:
    # A 40 px square changes 0.83% of the compared picture, 1.7% of its left half.
    base, changed = picture(None), picture(None)
    changed[0:40, 0:40] = 250
    half = [[[320, 0], [640, 0], [640, 360], [320, 360]]]
    assert flags(gate(min_area=0.012), [frame("c", 0, base), frame("c", 1, changed)]) == [
        False, True,
    ]  # fmt: skip
    stage = gate(min_area=0.012, ignore=half)
    assert flags(stage, [frame("c", 0, base), frame("c", 1, changed)]) == [False, False]


def test_show_keeps_the_changed_pixels_outside_ignored_polygons() -> None:
    stage = gate(show=True, ignore=[[[0, 0], [320, 0], [320, 360], [0, 360]]])
    first = stage.process(frame("cam", 0, picture(100)))[0]
    assert first.motion is not None and first.motion.shown and first.motion.mask is None
    moved = picture(None)
    moved[100:140, 100:140] = 250  # in the ignored left half
    moved[200:240, 500:540] = 250  # in the watched right half
    (out,) = stage.process(frame("cam", 1, moved))
    assert out.motion is not None and not out.motion.still
    mask = out.motion.mask
    assert mask is not None
    assert mask.dtype == bool and mask.shape == (90, 160)
    ys, xs = np.nonzero(mask)
    # Only the right-hand square, at a quarter of the frame's scale (blur widens it a little).
    assert 118 <= xs.min() <= 126 and 134 <= xs.max() <= 138
    assert 46 <= ys.min() <= 51 and 59 <= ys.max() <= 63
    unshown = gate().process(frame("cam", 0, picture(100)))[0].motion
    assert unshown is not None and not unshown.shown and unshown.mask is None


def test_the_annotated_frame_tints_motion_and_labels_still_frames() -> None:
    stage = gate(show=True)
    stage.process(frame("cam", 0, picture(None)))
    moved = picture(None)
    moved[200:240, 500:540] = 250
    (out,) = stage.process(frame("cam", 1, moved))
    drawn = annotate(out)
    assert drawn[220, 520].tolist() != moved[220, 520].tolist()
    assert drawn[220, 520, 2] > drawn[220, 520, 0]  # redder than it was
    assert drawn[50, 50].tolist() == moved[50, 50].tolist()  # untouched where nothing moved
    (still,) = stage.process(frame("cam", 2, moved))
    assert still.predicted and still.motion is not None and still.motion.still
    assert still.motion.mask is not None and not still.motion.mask.any()
    labelled = annotate(still)
    assert (labelled != moved).any() and (labelled[:300] == moved[:300]).all()
    plain = gate()
    plain.process(frame("cam", 0, picture(None)))
    (unshown,) = plain.process(frame("cam", 1, moved))
    assert (annotate(unshown) == moved).all()


def test_decoded_planes_are_gated_on_their_luma_without_an_array_being_made() -> None:
    """The motion gate reads the Y plane in the decoder's buffer: a frame the detector then
    skips never gets the whole picture copied into an array."""
    import av

    from tests.stages.source.test_decoded_planes import Counting

    def decoded(image: np.ndarray) -> Frame:
        yuv = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
        planes = Counting(av.VideoFrame.from_ndarray(yuv, format="yuv420p").reformat(640, 360))
        info = StreamInfo("cam", "x", 640, 360, None)
        return Frame("cam", 0, 0.0, 0.0, None, info, planes=planes)  # type: ignore[arg-type]

    images = [picture(100), picture(100), picture(300), picture(300)]
    planes_frames = [decoded(image) for image in images]
    for seq, f in enumerate(planes_frames):
        f.seq, f.pts = seq, seq / 25
    array_frames = [frame("cam", seq, image) for seq, image in enumerate(images)]
    assert flags(gate(), planes_frames) == flags(gate(), array_frames) == [
        False, True, False, True,
    ]  # fmt: skip
    assert [f.i420().arrays for f in planes_frames] == [0, 0, 0, 0]  # type: ignore[union-attr]
    assert all(f.__dict__.get("_yuv") is None and f.__dict__.get("_image") is None
               for f in planes_frames)  # fmt: skip


def test_a_still_picture_is_detected_when_the_gap_passes_max_skip_s() -> None:
    """Stream time that jumps past ``max_skip_s`` (frames dropped, a slow camera) is overdue
    too, not only a gap of exactly ``max_skip_s``."""
    stage = gate(max_skip_s=2.0)
    frames = [frame("cam", i, picture(100)) for i in range(4)]
    for f, pts in zip(frames, [0.0, 1.0, 2.5, 3.0], strict=True):
        f.pts = pts
    assert flags(stage, frames) == [False, True, False, True]


def test_stream_time_that_goes_back_is_detected_and_the_same_time_is_not() -> None:
    """A file that loops starts its stream time again: its first frame is detected, as a
    new start; a still frame at the very time of the last detection is not overdue."""
    stage = gate(max_skip_s=100.0)
    frames = [frame("cam", i, picture(100)) for i in range(5)]
    for f, pts in zip(frames, [5.0, 5.0, 6.0, 1.0, 1.0], strict=True):
        f.pts = pts
    assert flags(stage, frames) == [False, True, True, False, True]


@pytest.mark.parametrize("sizes", [[(360, 640), (480, 640), (360, 640)]])
def test_a_source_whose_picture_size_changes_starts_over(sizes: list[tuple[int, int]]) -> None:
    """A camera that switches resolution (its grey copy is taller or shorter than the last):
    its first frame at the new size is compared with nothing, and detected."""
    stage = gate()
    frames = []
    for height, width in sizes:
        for _ in range(2):
            image = np.full((height, width, 3), 120, np.uint8)
            frames.append(frame("cam", len(frames), image))
    assert flags(stage, frames) == [False, True, False, True, False, True]


@pytest.mark.parametrize(
    ("height", "width", "grey"), [(33, 100, (53, 160)), (2, 1000, (1, 160)), (90, 160, (90, 160))]
)
def test_the_grey_copy_keeps_the_aspect_rounded_to_at_least_one_row(
    height: int, width: int, grey: tuple[int, int]
) -> None:
    """160 px across (the default width), the rows rounded to the nearest (33 x 160 / 100 =
    52.8), never none; shrunk by area and blurred with OpenCV's 5 x 5 binomial kernel (its
    Gaussian for sigma 0: [1, 4, 6, 4, 1] / 16), to within its fixed-point rounding."""
    stage = gate()
    rng = np.random.default_rng(height)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    small = stage._grey(frame("cam", 0, image))
    assert small.shape == grey
    luma = cv2.resize(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), grey[::-1],
                      interpolation=cv2.INTER_AREA)  # fmt: skip
    binomial = np.array([1, 4, 6, 4, 1], np.float32) / 16
    blurred = cv2.sepFilter2D(luma, -1, binomial, binomial, borderType=cv2.BORDER_REFLECT_101)
    assert np.abs(small.astype(int) - blurred).max() <= 1
