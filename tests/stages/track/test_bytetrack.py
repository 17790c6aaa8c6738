"""ByteTrack on synthetic trajectories: ids stay with their objects through crossings, missed
and low-score frames; new tracks wait for confirmation; sources never mix."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.boxes import iou_matrix
from vapipe.stages.track.boxes import duplicates_of, widened
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.stage import TrackStage

NAMES = ("person", "truck", "car")  # truck and car: one group (confusable)


def dets(boxes: list[tuple[float, float, float, float]], scores=None, classes=None) -> Detections:
    count = len(boxes)
    return Detections(
        np.array(boxes, np.float32).reshape(count, 4),
        np.array(scores if scores is not None else [0.9] * count, np.float32),
        np.array(classes if classes is not None else [0] * count, np.int32),
        NAMES,
    )


def box_at(x: float, y: float, w: float = 40, h: float = 80) -> tuple[float, float, float, float]:
    return (x, y, x + w, y + h)


def run(tracker: ByteTracker, frames: list[Detections], fps: float = 25) -> list[list[int]]:
    """Track ids per frame, in each frame's detection order (-1: not on a confirmed track)."""
    out = []
    for index, frame in enumerate(frames):
        tracked = tracker.update(frame, index / fps)
        assert tracked.track_id is not None
        out.append(tracked.track_id.tolist())
    return out


def test_two_objects_crossing_keep_their_ids() -> None:
    # A walks right, B walks left on the same row; they pass through each other at frame 20.
    frames = [dets([box_at(10 + 10 * i, 100), box_at(410 - 10 * i, 100)]) for i in range(41)]
    ids = run(ByteTracker(TrackConfig()), frames)
    assert ids[0] == [1, 2]
    # Around the crossing, boxes overlap and the assignment could swap: the motion model must
    # carry each track through. Compare far before and far after.
    assert ids[-1] == [1, 2], f"ids swapped at the crossing: {ids[15:26]}"


def test_missed_frames_and_low_scores_keep_the_id() -> None:
    frames = []
    for i in range(30):
        if 10 <= i < 14:
            frames.append(dets([]))  # missed: 4 frames = 0.16 s < lost_s
        elif 20 <= i < 25:
            frames.append(dets([box_at(10 + 5 * i, 50)], scores=[0.2]))  # occluded: low score
        else:
            frames.append(dets([box_at(10 + 5 * i, 50)]))
    ids = run(ByteTracker(TrackConfig()), frames)
    flat = {i for frame in ids for i in frame}
    assert flat == {1}, f"the object got new ids: {ids}"
    assert all(frame == [1] for frame in ids[20:25]), "low-score boxes did not keep the track"


def test_a_track_lost_longer_than_lost_s_comes_back_with_a_new_id() -> None:
    frames = [dets([box_at(100, 100)]) for _ in range(5)]
    frames += [dets([]) for _ in range(40)]  # 1.6 s at 25 fps > lost_s 1.0
    frames += [dets([box_at(100, 100)]) for _ in range(5)]
    ids = run(ByteTracker(TrackConfig(lost_s=1.0)), frames)
    assert ids[0] == [1] and ids[-1] == [2], ids[-5:]


def test_new_tracks_wait_for_confirmation_after_the_first_frame() -> None:
    frames = [dets([box_at(0, 0)])] + [dets([box_at(0, 0), box_at(300, 300)]) for _ in range(3)]
    ids = run(ByteTracker(TrackConfig(confirm_frames=3, confirm_score=1.0)), frames)
    assert ids == [[1], [1, -1], [1, -1], [1, 2]], ids


def test_a_one_frame_flicker_never_gets_an_id() -> None:
    frames = [dets([box_at(0, 0)]), dets([box_at(0, 0), box_at(300, 300)]), dets([box_at(0, 0)])]
    tracker = ByteTracker(TrackConfig(confirm_frames=2, confirm_score=1.0))
    ids = run(tracker, frames + [dets([box_at(0, 0)])] * 3)
    assert max(max(frame) for frame in ids) == 1 and tracker.next_id == 2


def test_class_aware_tracks_do_not_change_class() -> None:
    frames = [dets([box_at(0, 0)], classes=[0]) for _ in range(3)]
    frames += [dets([box_at(0, 0)], classes=[2]) for _ in range(3)]
    ids = run(ByteTracker(TrackConfig(class_aware=True)), frames)
    assert ids[0] == [1] and ids[-1] == [2]
    ids = run(ByteTracker(TrackConfig(class_aware=False)), frames)
    assert {i for frame in ids for i in frame} == {1}


def test_a_class_flip_and_a_box_named_twice_stay_one_track_of_the_voted_class() -> None:
    # A car (class 2) that the detector sometimes calls a bicycle (1), and on some frames
    # reports twice, as both classes on the same box (class-aware NMS keeps both).
    frames = []
    for i in range(30):
        box = box_at(10 + 8 * i, 50, 80, 40)
        if i % 5 == 3:
            frames.append(dets([box], scores=[0.7], classes=[1]))
        elif i % 5 == 1:
            shifted = (box[0] + 1, box[1], box[2] + 1, box[3] + 2)
            frames.append(dets([shifted, box], scores=[0.6, 0.8], classes=[1, 2]))
        else:
            frames.append(dets([box], scores=[0.8], classes=[2]))
    tracker = ByteTracker(TrackConfig())
    out = [tracker.update(frame, i / 25) for i, frame in enumerate(frames)]
    tracked = [(d.track_id.tolist(), d.class_id.tolist()) for d in out]
    assert {t for ids, _ in tracked for t in ids if t >= 0} == {1}, tracked
    assert all(ids.count(1) == 1 for ids, _ in tracked), "one box per object per frame"
    assert tracker.next_id == 2
    # Every tracked box carries the vote (car), also on the frames the detector said bicycle.
    assert all(
        c == 2 for ids, classes in tracked for t, c in zip(ids, classes, strict=True) if t == 1
    )
    # The vote follows the evidence: mostly-bicycle makes it a bicycle.
    flipped = [dets([box_at(10 + 8 * i, 50)], classes=[1 if i % 4 else 2]) for i in range(12)]
    last = run_classes(ByteTracker(TrackConfig()), flipped)[-1]
    assert last == [1]


def test_a_merged_duplicate_votes_for_its_class() -> None:
    # Each frame the box is car 0.6 and bicycle 0.5 (merged into the car); twice it is a
    # bicycle alone (0.7). Car 3.6 against bicycle 3.0 + 1.4: the duplicates' votes decide.
    frames = [
        dets([box_at(10 * i, 0)], scores=[0.7], classes=[1])
        if i in (3, 5)
        else dets([box_at(10 * i, 0), box_at(10 * i, 1)], scores=[0.6, 0.5], classes=[2, 1])
        for i in range(8)
    ]
    assert run_classes(ByteTracker(TrackConfig()), frames)[-1][0] == 1


def test_a_new_objects_duplicate_votes_for_no_other_track() -> None:
    # A weak car is tracked; then a new object appears far away, named twice (car and
    # bicycle, equally sure). Its duplicate's vote belongs to the new object alone.
    first = dets([box_at(0, 0)], scores=[0.35], classes=[2])
    second = dets(
        [box_at(0, 0), box_at(300, 0), box_at(300, 1)], scores=[0.35, 0.9, 0.9], classes=[2, 2, 1]
    )
    classes = run_classes(ByteTracker(TrackConfig()), [first, second])
    assert classes[-1][0] == 2, classes


def test_merging_is_only_for_other_classes_on_the_same_box() -> None:
    # Two people side by side (same class, overlapping) and a person on a bicycle (boxes of
    # two classes overlapping IoU ~0.6): four objects, four tracks.
    people = [box_at(0, 0, 40, 80), box_at(10, 0, 40, 80)]
    rider = [box_at(200, 0, 40, 80), box_at(200, 30, 40, 50)]
    frames = [dets([*people, *rider], classes=[0, 0, 0, 2]) for _ in range(3)]
    for aware in (True, False):
        ids = run(ByteTracker(TrackConfig(class_aware=aware)), frames)
        assert sorted(ids[-1]) == [1, 2, 3, 4]
        merging = TrackConfig(merge_iou=0.5, class_aware=aware)
        assert run(ByteTracker(merging), frames)[-1].count(-1) == 1


def run_classes(tracker: ByteTracker, frames: list[Detections]) -> list[list[int]]:
    return [tracker.update(frame, i / 25).class_id.tolist() for i, frame in enumerate(frames)]


def test_a_weak_detection_that_overlaps_its_track_continues_it() -> None:
    # A car entering the picture: confident at first, then scored 0.35 while its box grows
    # and shifts (IoU with the prediction about 0.5). Score fusion may rank pairs but must not
    # gate them: 0.35 x 0.5 is under match_iou 0.2, the overlap itself is not.
    frames = [dets([box_at(0, 0, 40, 40)]) for _ in range(3)]
    frames += [dets([box_at(0, 0, 40 + 20 * k, 40)], scores=[0.35]) for k in range(1, 4)]
    ids = run(ByteTracker(TrackConfig()), frames)
    assert ids == [[1]] * 6, ids


def test_low_score_detections_never_start_tracks() -> None:
    frames = [dets([box_at(0, 0)], scores=[0.25]) for _ in range(10)]
    assert run(ByteTracker(TrackConfig()), frames) == [[-1]] * 10  # below new_track_score 0.3


def frame(source: str, seq: int, boxes: Detections) -> Frame:
    info = StreamInfo(source, "x", 640, 480, None)
    image = np.zeros((480, 640, 3), np.uint8)
    return Frame(source, seq, seq / 25, 0.0, image, info, detections=boxes)


@pytest.mark.parametrize("apart", [3, 300], ids=["same-place", "far-apart"])
def test_sources_sharing_a_batch_never_mix(apart: int) -> None:
    stage = TrackStage("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    seen: dict[str, set[int]] = {"a": set(), "b": set()}
    for seq in range(20):
        # Interleaved as a shared inference batch delivers them; at the same place in both
        # (one shared tracker would merge them), or far apart (it would number them 1 and 2).
        for source, offset in (("a", 0), ("b", apart)):
            (out,) = stage.process(frame(source, seq, dets([box_at(10 * seq + offset, 50)])))
            seen[source].update(out.detections.track_id.tolist())
    assert seen == {"a": {1}, "b": {1}}, "ids leaked between sources"


def test_untracked_kept_or_dropped() -> None:
    for mode, expected in (("drop", 1), ("keep", 2)):
        stage = TrackStage(
            "track", TrackConfig(untracked=mode, confirm_frames=2, confirm_score=1.0)
        )
        stage.open(None)  # type: ignore[arg-type]
        stage.process(frame("a", 0, dets([box_at(0, 0)])))
        (out,) = stage.process(frame("a", 1, dets([box_at(0, 0), box_at(300, 300)])))
        assert len(out.detections) == expected
        assert out.detections.track_id.tolist()[:1] == [1]


@pytest.mark.parametrize("seed", range(4))
def test_iou_matrix_matches_pairwise(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = np.sort(rng.uniform(0, 100, (6, 2, 2)), axis=1).reshape(6, 4)[:, [0, 2, 1, 3]]
    b = np.sort(rng.uniform(0, 100, (5, 2, 2)), axis=1).reshape(5, 4)[:, [0, 2, 1, 3]]
    from vapipe.stages.boxes import box_iou

    expected = np.stack([box_iou(box, b) for box in a])
    np.testing.assert_allclose(iou_matrix(a, b), expected, atol=1e-9)


class RecordingTracker:
    """A stand-in tracker: numbers every detection and keeps what it was given."""

    def __init__(self) -> None:
        self.next_id = 1
        self.images: list[object] = []

    def update(self, found: Detections, time_s: float, image=None) -> Detections:  # type: ignore[no-untyped-def]
        self.images.append(image)
        ids = np.arange(self.next_id, self.next_id + len(found))
        self.next_id += len(found)
        return found.replace(track_id=ids)


@pytest.mark.parametrize("pixels", [False, True])
def test_another_tracker_plugs_in_through_new_tracker(pixels: bool) -> None:
    made: list[RecordingTracker] = []

    class Stage(TrackStage):
        reads_pixels = pixels

        def new_tracker(self) -> RecordingTracker:
            made.append(RecordingTracker())
            return made[-1]

    stage = Stage("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    for seq in range(3):
        for source in ("a", "b"):
            (out,) = stage.process(frame(source, seq, dets([box_at(0, 0), box_at(90, 0)])))
    assert len(made) == 2, "one tracker per source"
    assert out.detections.track_id.tolist() == [5, 6]
    assert stage.stats() == {"tracks": {"a": 6, "b": 6}}
    assert all((image is not None) == pixels for image in made[0].images)


def test_an_expired_tracks_votes_go_with_it() -> None:
    # A person (class 0) and a car (class 2) tracked side by side; the person leaves and its
    # track expires. The car's class must stay its own: votes that stayed behind when the
    # person's row went would now sit on the car's row and make it a "person".
    person, car = box_at(100, 100), box_at(400, 100, w=120, h=60)
    frames = [dets([person, car], classes=[0, 2]) for _ in range(20)]
    frames += [dets([car], classes=[2]) for _ in range(40)]  # 1.6 s > lost_s: person expires
    frames += [dets([car, box_at(700, 300)], classes=[2, 1]) for _ in range(5)]  # a bicycle
    tracker = ByteTracker(TrackConfig(lost_s=1.0))
    classes = run_classes(tracker, frames)
    assert len(tracker) == 2, "the person's track did not expire"
    assert classes[25] == [2] and classes[-1] == [2, 1], classes[-1]
    assert tracker.votes.shape[0] == len(tracker) and tracker.votes[:, 0].max() == 0.0


def square(x: float) -> tuple[float, float, float, float]:
    return (x, 0.0, x + 10.0, 10.0)


@pytest.mark.parametrize("order", ["best first", "best second"])
def test_a_duplicate_keeps_the_primary_it_was_given(order: str) -> None:
    # A (person, best) and B (bicycle) name one box; C (another person on it, weaker) must not
    # take B over, wherever A sits in the list (index 0 or not).
    a, x, b, c = square(0), square(500), square(0), square(0)
    if order == "best first":
        found = dets([a, x, b, c], scores=[0.9, 0.95, 0.8, 0.7], classes=[0, 0, 1, 0])
        expected = [-1, -1, 0, -1]
    else:
        found = dets([x, a, b, c], scores=[0.95, 0.9, 0.8, 0.7], classes=[0, 0, 1, 0])
        expected = [-1, -1, 1, -1]
    assert duplicates_of(found, 0.8).tolist() == expected


def test_every_detection_is_looked_at_after_one_already_merged() -> None:
    # Two objects, each named twice: the second pair is merged too.
    found = dets([square(0), square(0), square(100), square(100)],
                 scores=[0.9, 0.8, 0.7, 0.6], classes=[0, 1, 0, 1])  # fmt: skip
    assert duplicates_of(found, 0.8).tolist() == [-1, 0, -1, 2]


def test_a_duplicate_of_a_lower_class_id_is_merged_too() -> None:
    # The best box is class 2 (car) and its duplicate class 0, and the other way round.
    assert duplicates_of(dets([square(0)] * 2, [0.9, 0.8], [2, 0]), 0.8).tolist() == [-1, 0]
    assert duplicates_of(dets([square(0)] * 2, [0.9, 0.8], [0, 2]), 0.8).tolist() == [-1, 0]


def test_merging_takes_an_iou_of_exactly_merge_iou_and_1_turns_it_off() -> None:
    half = dets([(0, 0, 2, 1), (0, 0, 1, 1)], [0.9, 0.8], [0, 1])  # IoU exactly 0.5
    assert duplicates_of(half, 0.5).tolist() == [-1, 0]
    same = dets([square(0)] * 2, [0.9, 0.8], [0, 1])  # IoU exactly 1
    assert duplicates_of(same, 1.0).tolist() == [-1, -1]
    assert duplicates_of(same, 0.999).tolist() == [-1, 0]


def test_a_duplicate_votes_for_the_track_of_its_own_primary() -> None:
    # Two tracked people; then the second (track row 1, detection 1) is named twice, bicycle
    # first: its person duplicate votes for the second track, not for the first.
    # class_aware off: a person named a truck too is one object (any class may be any).
    tracker = ByteTracker(TrackConfig(class_half_life_s=1e9, class_aware=False))
    tracker.update(dets([square(0), square(100)], [0.9, 0.9], [0, 0]), 0.0)
    named_twice = dets([square(0), square(100), square(100)], [0.9, 0.9, 0.8], [0, 1, 0])
    tracker.update(named_twice, 1 / 25)
    assert tracker.votes[0].tolist() == pytest.approx([1.8, 0.0])
    assert tracker.votes[1].tolist() == pytest.approx([1.7, 0.9])


def test_a_new_class_column_keeps_every_track_s_votes_in_its_own_class() -> None:
    # Two tracks of class 0; then class 1 appears on the first: the votes of class 0 stay in
    # class 0's column for both (a widened table with the old one copied to the wrong place
    # would give the first track a class-1 lead).
    tracker = ByteTracker(TrackConfig(class_half_life_s=1e9, class_aware=False))
    tracker.update(dets([square(0), square(100)], [0.9, 0.9], [0, 0]), 0.0)
    out = tracker.update(dets([square(0), square(100)], [0.5, 0.9], [1, 0]), 1 / 25)
    assert out.class_id.tolist() == [0, 0]
    assert tracker.votes[0].tolist() == pytest.approx([0.9, 0.5])
    assert tracker.votes[1].tolist() == pytest.approx([1.8, 0.0])


def test_with_confirm_frames_1_a_later_track_has_an_id_at_once() -> None:
    tracker = ByteTracker(TrackConfig(confirm_frames=1))
    tracker.update(dets([square(0)]), 0.0)
    later = tracker.update(
        dets([square(0), square(300), square(600)], [0.9, 0.35, 0.9]), 1 / 25
    )  # weak or sure: at once
    assert later.track_id.tolist() == [1, 2, 3]
    waiting = ByteTracker(TrackConfig(confirm_frames=2, confirm_score=1.0))
    waiting.update(dets([square(0)]), 0.0)
    assert waiting.update(dets([square(0), square(300)]), 1 / 25).track_id.tolist() == [1, -1]


def test_widened_grows_each_side_by_the_fraction_of_the_box() -> None:
    boxes = np.array([[10.0, 20.0, 50.0, 100.0], [0.0, 0.0, 4.0, 2.0]])
    np.testing.assert_allclose(
        widened(boxes, 0.5), [[-10.0, -20.0, 70.0, 140.0], [-2.0, -1.0, 6.0, 3.0]]
    )
    np.testing.assert_allclose(widened(boxes, 0.0), boxes)


def test_a_score_at_the_thresholds_starts_a_track() -> None:
    """high_score and new_track_score are inclusive (0.5 is exact in float32)."""
    tracker = ByteTracker(TrackConfig(high_score=0.5, new_track_score=0.5, low_score=0.1))
    assert run(tracker, [dets([box_at(10, 10)], [0.5])]) == [[1]]
    assert len(tracker) == 1


def test_a_tentative_track_not_seen_again_is_dropped() -> None:
    tracker = ByteTracker(TrackConfig(confirm_frames=2, confirm_score=0.95))
    tracker.update(dets([box_at(10, 10)], [0.9]), 0.0)  # the first frame: confirmed
    tracker.update(dets([box_at(10, 10), box_at(300, 10)], [0.9, 0.6]), 0.04)
    assert tracker.ids.tolist() == [1, 0]
    tracker.update(dets([box_at(10, 10)], [0.9]), 0.08)
    assert tracker.ids.tolist() == [1]


def test_a_track_lost_exactly_lost_s_may_still_be_found() -> None:
    seen = [dets([box_at(10, 10)]), dets([]), dets([]), dets([box_at(10, 10)])]
    for third, expected in ((0.5, 1), (0.5 + 2**-10, 2)):  # exact in binary
        tracker = ByteTracker(TrackConfig(lost_s=0.5))
        times = [0.0, 0.25, third, 0.75]
        ids = [tracker.update(d, t).track_id.tolist() for d, t in zip(seen, times, strict=True)]
        # Lost for exactly lost_s the track is kept and found again; a moment longer, it
        # expired, and the object comes back as a new one (confirmed by its 0.9 score).
        assert ids == [[1], [], [], [expected]]


def test_a_lost_track_is_not_continued_by_a_weak_detection() -> None:
    """The second, low-score association is for tracks still on screen only."""
    tracker = ByteTracker(TrackConfig(untracked="keep"))
    tracker.update(dets([box_at(10, 10)], [0.9]), 0.0)
    tracker.update(dets([]), 0.04)  # missed: lost
    out = tracker.update(dets([box_at(10, 10)], [0.2]), 0.08)
    assert out.track_id is not None and out.track_id.tolist() == [-1]
    out = tracker.update(dets([box_at(10, 10)], [0.9]), 0.12)
    assert out.track_id is not None and out.track_id.tolist() == [1]


def test_a_duplicate_of_the_first_detection_starts_no_track_of_its_own() -> None:
    same_box = [box_at(10, 10), box_at(11, 10)]  # IoU 0.95: one object named car and truck
    tracker = ByteTracker(TrackConfig())
    assert run(tracker, [dets(same_box, [0.9, 0.6], [2, 1])]) == [[1, -1]]  # merged into it
    assert len(tracker) == 1
