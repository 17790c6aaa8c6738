"""Frames the detector skipped (``infer.interval``): the tracks coast on their motion model,
and their predicted boxes are the frame's detections."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stages.track.test_bytetrack import NAMES, box_at, dets, frame
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.errors import PipelineError
from vapipe.stages.events.records import frame_records
from vapipe.stages.nms import NmsConfig, NmsStage
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.stage import TrackStage


def walked(tracker: ByteTracker, frames: int, speed: float = 8.0) -> float:
    """One walker moving right at ``speed`` px per frame, detected on ``frames`` frames at
    25 fps; returns the time of the last."""
    for index in range(frames):  # the score falls from 0.9: the last one is 0.8
        score = 0.8 + 0.1 * (index < frames - 1)
        tracker.update(dets([box_at(100 + speed * index, 50)], [score], [2]), index / 25)
    return (frames - 1) / 25


def test_a_coasted_track_keeps_its_id_class_score_and_moves_on() -> None:
    tracker = ByteTracker(TrackConfig())
    last = walked(tracker, 10)
    ahead = [tracker.coast(last + k / 25) for k in (1, 2)]
    for step, out in enumerate(ahead, 1):
        assert out.track_id is not None and out.track_id.tolist() == [1]
        assert out.class_id.tolist() == [2] and out.names == NAMES
        assert out.score.tolist() == pytest.approx([0.8])  # its last detection's
        # Where the walker would be: the motion model has learnt its 8 px per frame.
        assert out.xyxy[0, 0] == pytest.approx(100 + 8 * (9 + step), abs=2.5)
        assert out.xyxy[0, 2] - out.xyxy[0, 0] == pytest.approx(40, abs=1)
    assert ahead[1].xyxy[0, 0] > ahead[0].xyxy[0, 0] + 5
    # The next detection where the walker is continues the same track.
    found = tracker.update(dets([box_at(100 + 8 * 12, 50)], [0.8], [2]), last + 3 / 25)
    assert found.track_id is not None and found.track_id.tolist() == [1]
    assert tracker.next_id == 2


def test_coasting_starts_ends_and_confirms_nothing() -> None:
    tracker = ByteTracker(TrackConfig(confirm_frames=3, confirm_score=0.9))
    tracker.update(dets([box_at(10, 10)], [0.95]), 0.0)  # first frame: confirmed at once
    tracker.update(dets([box_at(10, 10), box_at(300, 10)], [0.95, 0.5]), 0.04)
    assert len(tracker) == 2 and tracker.ids.tolist() == [1, 0]  # the second is tentative
    for k in range(1, 200):  # far past lost_s: coasting expires nothing
        out = tracker.coast(0.04 + k / 25)
        assert out.track_id is not None and out.track_id.tolist() == [1]  # never the tentative
    assert len(tracker) == 2 and tracker.ids.tolist() == [1, 0] and tracker.frames == 2


def test_a_lost_track_is_not_in_a_coasted_frame() -> None:
    tracker = ByteTracker(TrackConfig())
    last = walked(tracker, 5)
    tracker.update(dets([]), last + 1 / 25)  # missed: lost, not yet expired
    out = tracker.coast(last + 2 / 25)
    assert len(out) == 0 and len(tracker) == 1


def test_coasting_weighs_old_class_votes_less_as_time_passes() -> None:
    tracker = ByteTracker(TrackConfig(class_half_life_s=1.0))
    walked(tracker, 3)
    before = tracker.votes.copy()
    tracker.coast(3.08)  # three seconds on: an eighth
    assert tracker.votes == pytest.approx(before / 8, rel=0.01)


def test_the_track_stage_gives_a_skipped_frame_the_predicted_boxes() -> None:
    stage = TrackStage("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    for seq in range(6):
        stage.process(frame("cam", seq, dets([box_at(10 + 8 * seq, 50)])))
    skipped = frame("cam", 6, dets([]))
    skipped.detections, skipped.predicted = None, True
    (out,) = stage.process(skipped)
    assert out.detections is not None and out.detections.track_id.tolist() == [1]
    assert out.detections.xyxy[0, 0] == pytest.approx(10 + 8 * 6, abs=2.5)
    record = next(frame_records(out))
    assert record["predicted"] is True and record["detections"][0]["track_id"] == 1
    unflagged = frame("cam", 7, dets([]))
    unflagged.detections = None
    with pytest.raises(PipelineError, match="no detections"):
        stage.process(unflagged)


def test_a_tracker_without_coast_gives_a_skipped_frame_no_boxes() -> None:
    class Plain(TrackStage):
        def new_tracker(self):  # type: ignore[no-untyped-def]
            class Only:
                next_id = 1

                def update(self, found: Detections, time_s: float, image=None):  # type: ignore[no-untyped-def]
                    return found

            return Only()

    stage = Plain("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    skipped = frame("cam", 0, dets([]))
    skipped.detections, skipped.predicted = None, True
    (out,) = stage.process(skipped)
    assert out.detections is not None and len(out.detections) == 0
    assert out.detections.track_id is not None  # the analytics read ids: none, not missing


def test_a_skipped_frame_before_any_track_reaches_the_analytics_as_tracked() -> None:
    # The detector's first look at a source came after a skipped frame (infer.interval
    # staggers sources), or every track has gone: the coasted frame has no boxes, and the
    # analytics must still see it as tracked (a tracker with no tracks has length 0).
    from vapipe.stages.analytics.config import AnalyticsConfig
    from vapipe.stages.analytics.stage import AnalyticsStage

    stage = TrackStage("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    line = {"name": "gate", "start": [320, 0], "end": [320, 480]}
    counter = AnalyticsStage("analytics", AnalyticsConfig(lines=[line]))
    counter.open(None)  # type: ignore[arg-type]
    for seq in range(2):
        skipped = frame("cam", seq, dets([]))
        skipped.detections, skipped.predicted = None, True
        (out,) = stage.process(skipped)
        assert out.detections is not None and out.detections.track_id is not None
        counter.process(out)


def test_nms_passes_a_skipped_frame_on_and_records_say_predicted_only_there() -> None:
    stage = NmsStage("nms", NmsConfig())
    skipped = frame("cam", 0, dets([]))
    skipped.detections, skipped.predicted = None, True
    assert list(stage.process(skipped)) == [skipped] and skipped.detections is None
    plain = frame("cam", 1, dets([]))
    plain.detections = None
    with pytest.raises(PipelineError, match="no detections"):
        stage.process(plain)
    assert "predicted" not in next(frame_records(frame("cam", 2, dets([box_at(1, 1)]))))
    assert np.array_equal(dets([]).xyxy, np.zeros((0, 4), np.float32))


def test_a_still_frame_holds_the_tracks_where_they_are_and_keeps_them_seen() -> None:
    tracker = ByteTracker(TrackConfig(lost_s=1.0))
    last = walked(tracker, 10)
    where = tracker.coast(last + 1 / 25).xyxy.copy()  # one frame on, moving
    held = [tracker.coast(last + k / 25, still=True) for k in range(2, 100)]  # ~4 s still
    assert all(np.allclose(h.xyxy, where) for h in held)
    assert tracker.last_seen.tolist() == pytest.approx([last + 99 / 25])
    # The first detection after the still spell misses it: lost, but not yet expired.
    tracker.update(dets([]), last + 100 / 25)
    assert len(tracker) == 1


@pytest.mark.parametrize(
    ("gap_buffer", "coasted", "same_track"),
    [(0.1, 5, True), (0.0, 5, False), (0.5, 0, False), (0.05, 5, False)],
)
def test_gap_buffer_widens_boxes_by_the_frames_the_detector_skipped(
    gap_buffer: float, coasted: int, same_track: bool
) -> None:
    """A car seen once, then 48 px (more than its 40 px width) further on: after 5 skipped
    frames a buffer of 0.1 a frame (0.5 a side: IoU 0.25) meets it; without the buffer, with
    too little (0.25 a side: IoU 0.11), or with no skipped frame, nothing does."""
    tracker = ByteTracker(TrackConfig(gap_buffer=gap_buffer, confirm_frames=2))
    tracker.update(dets([box_at(100, 50)], [0.9], [2]), 0.0)  # the first frame: an id
    for k in range(1, coasted + 1):
        tracker.coast(k / 25)
    assert tracker.skipped == coasted
    found = tracker.update(dets([box_at(148, 50)], [0.9], [2]), (coasted + 1) / 25)
    assert tracker.skipped == 0
    assert found.track_id is not None
    assert (found.track_id.tolist() == [1]) is same_track
    assert len(tracker) == (1 if same_track else 2)


def test_gap_buffer_stops_at_one_box_a_side() -> None:
    """Capped at 1 a side: a car 100 px on (2.5 widths) after 5 skipped frames at 0.5 a
    frame is another object (IoU 0.09; uncapped, 2.5 a side would have met it)."""
    tracker = ByteTracker(TrackConfig(gap_buffer=0.5))
    tracker.update(dets([box_at(100, 50)], [0.9], [2]), 0.0)
    for k in range(1, 6):
        tracker.coast(k / 25)
    found = tracker.update(dets([box_at(200, 50)], [0.9], [2]), 6 / 25)
    assert found.track_id is not None and found.track_id.tolist() != [1]
    assert len(tracker) == 2


def test_the_widened_pass_keeps_the_shape_gate() -> None:
    """A wide box (a car) where a walker's widened box reaches after skipped frames is
    another object: the second pass matches only what could be the same object."""
    tracker = ByteTracker(TrackConfig(gap_buffer=0.2))
    tracker.update(dets([box_at(100, 50)], [0.9], [0]), 0.0)  # a walker, 40 x 80
    for k in range(1, 6):
        tracker.coast(k / 25)
    car = (130.0, 90.0, 330.0, 130.0)  # 200 x 40: aspect 5 against 0.5
    found = tracker.update(dets([car], [0.9], [0]), 6 / 25)
    assert found.track_id is not None and found.track_id.tolist() != [1]
    assert len(tracker) == 2


def test_still_frames_hold_tracked_objects_not_lost_ones() -> None:
    tracker = ByteTracker(TrackConfig(lost_s=1.0))
    tracker.update(dets([box_at(10, 10), box_at(200, 10)], [0.9, 0.9]), 0.0)
    tracker.update(dets([box_at(10, 10)], [0.9]), 0.04)  # the second one is lost
    for k in range(2, 60):  # 2.3 s of still frames: what is in view stays
        tracker.coast(k / 25, still=True)
    tracker.update(dets([box_at(10, 10)], [0.9]), 60 / 25)
    assert tracker.ids.tolist() == [1]  # the lost one expired; the still one did not
