"""A new track's path traced back through the boxes no identified track held (``backtrace_s``):
the analytics learn where an object was while the detector was unsure of it, so a line it
crossed before it got its id counts; what was never that object's path is never its origin."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.stages.track.test_bytetrack import box_at, dets
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.stage import AnalyticsStage
from vapipe.stages.boxes import iou_matrix
from vapipe.stages.track.backtrace import CHAIN_GAP_S, CHAIN_IOU, Backtrace
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.stage import TrackStage

FPS = 25


def box(x: float, y: float = 100, w: float = 40, h: float = 80) -> np.ndarray:
    return np.array(box_at(x, y, w, h), np.float64)


def moving(trace: Backtrace, xs: list[float], start: float = 0.0) -> None:
    """One box a frame at each x, 1/FPS apart from ``start``."""
    for k, x in enumerate(xs):
        trace.add(box(x)[None, :], start + k / FPS)


def test_the_path_is_followed_back_to_its_earliest_box() -> None:
    trace = Backtrace(window_s=1.0)
    moving(trace, [100 + 3 * k for k in range(10)])  # 100 .. 127, frames 0-9
    origin = trace.origin(box(130), 10 / FPS)
    np.testing.assert_array_equal(origin, box(100))


def test_the_best_overlapping_box_is_followed_not_a_neighbour() -> None:
    trace = Backtrace(window_s=1.0)
    for k in range(5):  # the object at 100 + 2k and another 25 px above-right of it
        trace.add(np.stack([box(120 + 2 * k, 75), box(100 + 2 * k)]), k / FPS)
    np.testing.assert_array_equal(trace.origin(box(110), 5 / FPS), box(100))


def test_nothing_before_the_window_is_an_origin() -> None:
    trace = Backtrace(window_s=0.2)  # 5 frames at 25 fps
    moving(trace, [100 + 2 * k for k in range(10)])  # frames 0-9
    origin = trace.origin(box(120), 10 / FPS)
    # Frames 5-9 are within 0.2 s of frame 10; frame 5 (x 110) is the earliest kept.
    np.testing.assert_array_equal(origin, box(110))
    assert len(trace.frames) == 6  # 4 .. 9: what is older than the window is let go


def test_a_path_broken_longer_than_the_gap_ends_there() -> None:
    gap_frames = int(CHAIN_GAP_S * FPS)  # 6 frames: 0.24 s
    for gap, origin_x in ((gap_frames, 100), (gap_frames + 1, None)):
        trace = Backtrace(window_s=1.0)
        trace.add(box(100)[None, :], 0.0)
        for k in range(1, gap):  # frames with nothing left over
            trace.add(np.zeros((0, 4)), k / FPS)
        origin = trace.origin(box(102), gap / FPS)
        if origin_x is None:
            assert origin is None, "a box seen longer than the gap before is another object"
        else:
            np.testing.assert_array_equal(origin, box(origin_x))


def test_a_box_overlapping_less_than_the_chain_iou_is_not_the_path() -> None:
    # Boxes 40 wide: a shift of d px gives IoU (40 - d) / (40 + d).
    just_under = 40 * (1 - CHAIN_IOU) / (1 + CHAIN_IOU) + 0.5
    just_over = 40 * (1 - CHAIN_IOU) / (1 + CHAIN_IOU) - 0.5
    for shift, chained in ((just_under, False), (just_over, True)):
        trace = Backtrace(window_s=1.0)
        trace.add(box(100)[None, :], 0.0)
        overlap = iou_matrix(box(100)[None], box(100 + shift)[None])[0, 0]
        assert bool(overlap >= CHAIN_IOU) is chained
        assert (trace.origin(box(100 + shift), 1 / FPS) is not None) is chained


def test_a_zero_window_keeps_nothing() -> None:
    trace = Backtrace(window_s=0.0)
    moving(trace, [100, 102, 104])
    assert not trace.frames
    assert trace.origin(box(106), 3 / FPS) is None


def test_the_origin_is_a_copy() -> None:
    trace = Backtrace(window_s=1.0)
    moving(trace, [100, 102])
    origin = trace.origin(box(104), 2 / FPS)
    assert origin is not None
    origin[0] = -1
    assert trace.frames[0][1][0, 0] == 100


def unsure_then_sure(unsure: int, score: float = 0.2) -> list[Detections]:
    """An object scored ``score`` (under ``new_track_score``) for ``unsure`` frames while it
    moves right 4 px a frame from x = 100, then 0.9."""
    return [dets([box_at(100 + 4 * k, 100)], [score if k < unsure else 0.9]) for k in range(20)]


def origins_of(tracker: ByteTracker, frames: list[Detections]) -> list[dict[int, list[float]]]:
    out = []
    for index, found in enumerate(frames):
        tracker.update(found, index / FPS)
        out.append({i: b.tolist() for i, b in tracker.origins.items()})
    return out


def test_a_track_identified_after_unsure_frames_reports_where_they_began() -> None:
    origins = origins_of(ByteTracker(TrackConfig()), unsure_then_sure(8))
    assert origins[8] == {1: list(box_at(100, 100))}, "the first unsure box is where it came from"
    assert all(o == {} for k, o in enumerate(origins) if k != 8), "reported once, at its id"


def test_a_tentative_tracks_boxes_are_part_of_the_path() -> None:
    # 0.32: starts a track (new_track_score 0.3) that waits a frame for its id (confirm_score
    # 0.35), after 3 frames at 0.2.
    frames = [dets([box_at(100 + 4 * k, 100)], [0.2 if k < 3 else 0.32]) for k in range(10)]
    origins = origins_of(ByteTracker(TrackConfig()), frames)
    assert origins[4] == {1: list(box_at(100, 100))}


def test_without_backtrace_there_is_no_origin() -> None:
    tracker = ByteTracker(TrackConfig(backtrace_s=0))
    assert all(o == {} for o in origins_of(tracker, unsure_then_sure(8)))
    assert not tracker.backtrace.frames


def test_an_identified_tracks_boxes_and_their_parts_are_no_ones_path() -> None:
    """What an identified track holds, and a box lying inside it (a fragment), are that
    object: a new track is never traced back through them."""
    tracker = ByteTracker(TrackConfig())
    for k in range(6):  # a sure walker, with a weak box over its head
        walker = box_at(100 + 4 * k, 100)
        head = (walker[0] + 10, 100, walker[0] + 30, 120)
        tracker.update(dets([walker, head], [0.9, 0.2]), k / FPS)
    assert all(len(boxes) == 0 for _, boxes in tracker.backtrace.frames)
    # A weak box elsewhere is kept for later tracks' paths.
    tracker.update(dets([box_at(124, 100), box_at(400, 100)], [0.9, 0.2]), 6 / FPS)
    np.testing.assert_array_equal(tracker.backtrace.frames[-1][1], [box_at(400, 100)])


def test_coasting_reports_no_origin() -> None:
    tracker = ByteTracker(TrackConfig())
    origins_of(tracker, unsure_then_sure(8)[:9])
    assert tracker.origins
    tracker.coast(9 / FPS)
    assert tracker.origins == {}


# Through the stages: a line at x = 150 (rightward is "out" by the line's direction).
LINE = {"name": "gate", "start": [150, 0], "end": [150, 400]}


def counted(
    frames: list[Detections], track: dict[str, Any], origins: list | None = None
) -> list[tuple[int, str]]:
    """(seq, direction) of the crossings the track and analytics stages make of ``frames``;
    ``origins`` gets (seq, track ids) of each frame that carried origins to the analytics."""
    tracker = TrackStage("track", TrackConfig.model_validate(track))
    tracker.open(None)  # type: ignore[arg-type]
    counter = AnalyticsStage("analytics", AnalyticsConfig.model_validate({"lines": [LINE]}))
    counter.open(None)  # type: ignore[arg-type]
    info = StreamInfo("cam", "x", 640, 360, FPS)
    out = []
    for seq, found in enumerate(frames):
        frame = Frame("cam", seq, seq / FPS, 0.0, np.zeros((360, 640, 3), np.uint8), info)
        frame.detections = found
        (frame,) = tracker.process(frame)
        if frame.track_origins is not None and origins is not None:
            origins.append((seq, sorted(frame.track_origins)))
        (frame,) = counter.process(frame)
        out += [(seq, e["direction"]) for e in frame.events if e["event"] == "line_cross"]
    return out


def across(unsure: int, start: float, step: float = 4) -> list[Detections]:
    return [dets([box_at(start + step * k, 100)], [0.2 if k < unsure else 0.9], [2])
            for k in range(24)]  # fmt: skip


def test_a_car_unsure_until_past_the_line_is_counted_where_it_crossed() -> None:
    # Centre 120 at first (30 px before the line), 160 when sure (frame 10: 10 px past it).
    frames = across(unsure=10, start=100)
    origins: list = []
    # Counted once 20 px past (min_crossing_depth 0.25 of its 80 px height): frame 13.
    assert counted(frames, {}, origins) == [(13, "out")]
    assert origins == [(10, [1])], "the track stage hands the origin over with the new id"
    origins.clear()
    assert counted(frames, {"backtrace_s": 0}, origins) == [], "born past it, untraced"
    assert origins == []


@pytest.mark.parametrize(
    ("start", "step", "why"),
    [
        (140, 4, "first seen 10 px past the line (centre 160), going on: it never crossed"),
        (100, -4, "first seen 30 px before it (centre 120), walking away: it never crossed"),
        (128, 4, "first seen on the line (centre 148, inside the hysteresis band): no side"),
    ],
)
def test_an_origin_on_the_side_it_stays_or_on_the_line_counts_nothing(
    start: float, step: float, why: str
) -> None:
    assert counted(across(unsure=10, start=start, step=step), {}) == [], why


def test_the_other_way_is_the_other_direction() -> None:
    frames = across(unsure=10, start=160, step=-4)  # centre 180 -> 140 when sure
    assert counted(frames, {}) == [(13, "in")]  # 20 px past at 130: frame 13
    assert counted(frames, {"backtrace_s": 0}) == []


def test_an_unsure_object_that_stays_unsure_counts_nothing() -> None:
    frames = [dets([box_at(100 + 4 * k, 100)], [0.2], [2]) for k in range(24)]
    assert counted(frames, {}) == []


def test_the_edges_are_inclusive_an_overlap_of_exactly_the_chain_iou_continues_the_path() -> None:
    # 13 wide, shifted 7: IoU (13 - 7) / (13 + 7) = 0.3 exactly.
    trace = Backtrace(window_s=1.0)
    first = np.array([0.0, 0.0, 13.0, 80.0])
    trace.add(first[None, :], 0.0)
    shifted = first + np.array([7.0, 0.0, 7.0, 0.0])
    assert iou_matrix(first[None], shifted[None])[0, 0] == CHAIN_IOU
    np.testing.assert_array_equal(trace.origin(shifted, 0.125), first)


def test_a_gap_of_exactly_chain_gap_s_still_continues_the_path() -> None:
    trace = Backtrace(window_s=1.0)
    trace.add(box(100)[None, :], 0.0)
    assert CHAIN_GAP_S == 0.25  # exact in binary, so the edge itself is tested
    np.testing.assert_array_equal(trace.origin(box(102), 0.25), box(100))


def test_a_box_exactly_window_s_old_is_kept_and_followed() -> None:
    trace = Backtrace(window_s=0.25)
    for t, x in ((0.0, 100), (0.125, 102), (0.25, 104)):
        trace.add(box(x)[None, :], t)
    assert [t for t, _ in trace.frames] == [0.0, 0.125, 0.25]
    np.testing.assert_array_equal(trace.origin(box(106), 0.25), box(100))
    trace.add(box(106)[None, :], 0.375)  # now 0.375 s old: let go
    assert [t for t, _ in trace.frames] == [0.125, 0.25, 0.375]


def test_every_track_identified_on_one_frame_gets_its_own_origin() -> None:
    # Two objects far apart, unsure for 6 frames, sure together at frame 6.
    frames = [dets([box_at(100 + 4 * k, 100), box_at(400 - 4 * k, 200)],
                   [0.2 if k < 6 else 0.9] * 2) for k in range(10)]  # fmt: skip
    origins = origins_of(ByteTracker(TrackConfig()), frames)
    assert origins[6] == {1: list(box_at(100, 100)), 2: list(box_at(400, 200))}


def test_a_duplicate_of_a_held_box_under_another_class_is_no_ones_path() -> None:
    tracker = ByteTracker(TrackConfig())
    for k in range(4):  # a sure car, also named a bicycle (class-aware NMS keeps both)
        car = box_at(100 + 4 * k, 100)
        tracker.update(dets([car, car], [0.9, 0.25], [2, 1]), k / FPS)
    assert all(len(boxes) == 0 for _, boxes in tracker.backtrace.frames)
