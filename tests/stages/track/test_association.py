"""ByteTrack's three associations, rule by rule, on boxes placed for exact overlaps: which
detections each one considers, how it ranks pairs, where its gate lies; and, over random
scenes, that no frame gives one track two detections."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stages.track.test_bytetrack import box_at, dets
from vapipe.pipeline.detections import Detections
from vapipe.stages.boxes import iou_matrix
from vapipe.stages.track import bytetrack
from vapipe.stages.track.bytetrack import LOST, TRACKED, ByteTracker
from vapipe.stages.track.config import TrackConfig


def shift(iou: float, width: float = 40) -> float:
    """How far to move a box of ``width`` sideways for this IoU with where it was."""
    return width * (1 - iou) / (1 + iou)


def ids_of(out: Detections) -> list[int]:
    assert out.track_id is not None
    return out.track_id.tolist()


def tracked_at(*xs: float, config: TrackConfig | None = None) -> ByteTracker:
    """A tracker whose first frame (confirmed at once) held a box at each ``x``: ids 1, 2..."""
    tracker = ByteTracker(config or TrackConfig())
    assert ids_of(tracker.update(dets([box_at(x, 50) for x in xs]), 0.0)) == list(
        range(1, len(xs) + 1)
    )
    return tracker


def state_of(tracker: ByteTracker, track_id: int) -> int:
    return int(tracker.state[tracker.ids == track_id][0])


def test_the_boxes_placed_have_the_overlaps_the_tests_rely_on() -> None:
    for iou in (0.19, 0.25, 0.5, 0.55, 0.9):
        placed = iou_matrix(np.array([box_at(100, 50)]), np.array([box_at(100 + shift(iou), 50)]))
        assert placed[0, 0] == pytest.approx(iou)


def test_a_pair_through_the_gate_is_not_given_up_for_two_under_it() -> None:
    # Track 1 at 100 and track 2 a little right of it. Next frame: a 0.35 detection at IoU 0.55
    # with track 1 (and 0.19 with track 2), and a sure one at IoU 0.19 with track 1 only.
    # Ranked whole, the two pairs under the gate (0.19 x 0.9 + 0.19 x 0.35) outweighed the one
    # through it (0.55 x 0.35), and track 1's walker got a new id.
    right = 100 + shift(0.55) + shift(0.19)
    tracker = tracked_at(100, right)
    out = tracker.update(
        dets([box_at(100 + shift(0.55), 50), box_at(100 - shift(0.19), 50)], [0.35, 0.9]), 0.04
    )
    assert ids_of(out) == [1, 3]
    assert state_of(tracker, 1) == TRACKED and state_of(tracker, 2) == LOST


def test_the_first_association_ranks_pairs_by_overlap_times_score() -> None:
    # Both through the gate: an exact box at 0.35 (0.35) against IoU 0.5 at 0.8 (0.4): the
    # surer detection continues the track (ByteTrack's score fusion); overlap alone, or
    # overlap plus score (1.35 against 1.3), would pick the exact box.
    tracker = tracked_at(100)
    out = tracker.update(dets([box_at(100, 50), box_at(100 + shift(0.5), 50)], [0.35, 0.8]), 0.04)
    assert ids_of(out)[1] == 1 and ids_of(out)[0] != 1


def test_the_second_association_ranks_low_detections_by_overlap_alone() -> None:
    # Both low (0.1-0.3) and through its gate (0.5): IoU 0.9 at 0.15 against 0.55 at 0.29.
    # Fused (0.135 against 0.16) the looser box would win.
    tracker = tracked_at(100)
    out = tracker.update(
        dets([box_at(100 + shift(0.9), 50), box_at(100 - shift(0.55), 50)], [0.15, 0.29]), 0.04
    )
    assert ids_of(out) == [1, -1]


def test_the_third_association_ranks_tentative_pairs_by_overlap_times_score() -> None:
    # A tentative track (seen once, under confirm_score; confirm_frames 2): the detection that
    # continues it is confirmed. IoU 0.9 at 0.3 (0.27) against IoU 0.5 at 0.8 (0.4).
    tracker = ByteTracker(TrackConfig(confirm_score=1.0))
    tracker.update(dets([]), 0.0)  # past the first frame, which confirms at once
    assert ids_of(tracker.update(dets([box_at(100, 50)], [0.9]), 0.04)) == [-1]
    out = tracker.update(
        dets([box_at(100 + shift(0.9), 50), box_at(100 - shift(0.5), 50)], [0.3, 0.8]), 0.08
    )
    assert ids_of(out) == [-1, 1]


@pytest.mark.parametrize(("iou", "continued"), [(0.32, True), (0.25, False)])
def test_a_tentative_track_is_continued_only_at_iou_0_3(iou: float, continued: bool) -> None:
    tracker = ByteTracker(TrackConfig(confirm_score=1.0))
    tracker.update(dets([]), 0.0)
    tracker.update(dets([box_at(100, 50)], [0.9]), 0.04)
    out = tracker.update(dets([box_at(100 + shift(iou), 50)], [0.9]), 0.08)
    # Continued, it is seen twice and confirmed; else it is dropped and another starts.
    assert ids_of(out) == ([1] if continued else [-1])
    assert len(tracker) == 1 and tracker.hits.tolist() == [2 if continued else 1]


@pytest.mark.parametrize(("score", "kept"), [(0.1, True), (0.0999, False)])
def test_only_detections_from_low_score_keep_a_track_alive(score: float, kept: bool) -> None:
    tracker = tracked_at(100)
    out = tracker.update(dets([box_at(100, 50)], [score]), 0.04)
    assert ids_of(out) == ([1] if kept else [-1])
    assert state_of(tracker, 1) == (TRACKED if kept else LOST)


def test_an_overlap_of_exactly_the_gate_continues_the_track() -> None:
    # Boxes 30 wide, 10 apart: IoU 20 / 40 = 0.5 exactly, low_match_iou's default.
    tracker = ByteTracker(TrackConfig())
    tracker.update(dets([box_at(100, 50, w=30)]), 0.0)
    assert ids_of(tracker.update(dets([box_at(110, 50, w=30)], [0.2]), 0.04)) == [1]


@pytest.mark.parametrize("score", [0.05, 0.2])
def test_a_name_merged_into_another_keeps_no_second_track_alive(score: float) -> None:
    # Two tracked people, one just behind the other. Next frame the front one is seen as a
    # person (0.9) and, on nearly the same box, as a bicycle (the weaker name, merged into the
    # person): that name is not an object of its own, so it does not continue the second track
    # even where it overlaps it well.
    tracker = ByteTracker(TrackConfig())
    tracker.update(dets([(0, 0, 40, 80), (0, 10, 40, 90)], [0.9, 0.9]), 0.0)
    out = tracker.update(dets([(0, 0, 40, 80), (0, 5, 40, 85)], [0.9, score], [0, 1]), 0.04)
    assert ids_of(out)[0] == 1 and 2 not in ids_of(out)
    assert state_of(tracker, 2) == LOST


def test_class_aware_tracks_take_only_their_own_class() -> None:
    # Seen twice (a track seen once has no species yet: tests/stages/track/test_species.py).
    tracker = tracked_at(100, config=TrackConfig(class_aware=True))  # a person, class 0
    tracker.update(dets([box_at(100, 50)], [0.9], [0]), 0.04)
    car = tracker.update(dets([box_at(100, 50)], [0.9], [2]), 0.08)
    assert ids_of(car) == [2] and state_of(tracker, 1) == LOST
    tracker = ByteTracker(TrackConfig(class_aware=True))
    for time_s in (0.0, 0.04):
        tracker.update(dets([box_at(100, 50)], [0.9], [2]), time_s)  # a car
    person = tracker.update(dets([box_at(100, 50)], [0.9], [0]), 0.08)
    assert ids_of(person) == [2] and state_of(tracker, 1) == LOST


def test_boxes_are_widened_only_after_frames_the_detector_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buffers: list[float] = []
    real = bytetrack.widened

    def recorded(boxes: np.ndarray, buffer: float) -> np.ndarray:
        buffers.append(buffer)
        return real(boxes, buffer)

    monkeypatch.setattr(bytetrack, "widened", recorded)
    tracker = tracked_at(100)
    tracker.update(dets([box_at(104, 50)]), 0.04)
    assert buffers == []  # every frame detected: nothing to widen
    tracker.coast(0.08)
    tracker.coast(0.12)
    tracker.update(dets([box_at(116, 50)]), 0.16)
    assert buffers == pytest.approx([0.4, 0.4])  # gap_buffer 0.2 per skipped frame, both sides
    tracker = tracked_at(100, config=TrackConfig(gap_buffer=0))
    tracker.coast(0.04)
    tracker.update(dets([box_at(104, 50)]), 0.08)
    assert buffers == pytest.approx([0.4, 0.4])  # gap_buffer 0: off


def test_nothing_to_match_solves_no_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize

    sizes: list[tuple[int, ...]] = []
    real = scipy.optimize.linear_sum_assignment

    def recorded(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sizes.append(cost.shape)
        return real(cost)

    monkeypatch.setattr(scipy.optimize, "linear_sum_assignment", recorded)
    tracker = ByteTracker(TrackConfig())
    tracker.update(dets([box_at(100, 50)]), 0.0)  # no tracks yet
    tracker.update(dets([]), 0.04)  # no detections
    assert sizes == []
    tracker.update(dets([box_at(100, 50)]), 0.08)
    assert sizes == [(1, 1)]  # the confident detection against the lost track only


def random_scene(seed: int) -> list[tuple[Detections | None, float]]:
    """Walkers criss-crossing a 640x360 picture, detected with random scores, some frames
    skipped (None: coasted), some boxes named twice or split in two."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(3, 9))
    start = rng.uniform((0, 0), (600, 280), (count, 2))
    speed = rng.uniform(-12, 12, (count, 2))
    frames: list[tuple[Detections | None, float]] = []
    for index in range(60):
        time_s = index / 25
        if rng.random() < 0.25:
            frames.append((None, time_s))
            continue
        seen = rng.random(count) < 0.85
        corner = start[seen] + speed[seen] * index + rng.normal(0, 3, (int(seen.sum()), 2))
        boxes = np.concatenate((corner, corner + np.array([40, 80])), axis=1)
        scores = rng.uniform(0.05, 1.0, len(boxes))
        classes = rng.integers(0, 3, len(boxes))
        twice = rng.random(len(boxes)) < 0.2  # named again as another class, a bit weaker
        boxes = np.concatenate((boxes, boxes[twice] + rng.normal(0, 1, (int(twice.sum()), 4))))
        scores = np.concatenate((scores, scores[twice] * 0.8))
        classes = np.concatenate((classes, (classes[twice] + 1) % 3))
        frames.append((dets([tuple(b) for b in boxes], scores.tolist(), classes.tolist()), time_s))
    return frames


@pytest.mark.parametrize("seed", range(12))
def test_no_frame_gives_one_track_two_detections(seed: int) -> None:
    tracker = ByteTracker(TrackConfig(class_aware=bool(seed % 2)))
    for frame, time_s in random_scene(seed):
        out = tracker.coast(time_s) if frame is None else tracker.update(frame, time_s)
        ids = [i for i in ids_of(out) if i >= 0]
        assert len(ids) == len(set(ids)), f"a track twice at {time_s:.2f} s: {sorted(ids)}"
        confirmed = tracker.ids[tracker.ids > 0].tolist()
        assert len(confirmed) == len(set(confirmed)) and set(ids) <= set(confirmed)


def test_a_pair_just_under_the_gate_still_steers_the_first_ranking() -> None:
    # Track 1 has a detection at IoU 0.5 (the nearer) and one at 0.35; track 2 overlaps the
    # nearer one at 0.19, just under the gate. Ranked whole, as the first pass ranks, the nearer
    # one is left to neither (0.35 + 0.19 > 0.5) and track 1 takes the other. Ranking only the
    # pairs through the gate from the first pass (track 1 takes the nearer) counted worse on
    # the accuracy bench (count error 18 / 11 -> 19 / 12): this keeps that choice.
    near = 100 + shift(0.5)
    tracker = tracked_at(100, near + shift(0.19))
    out = tracker.update(dets([box_at(near, 50), box_at(100 - shift(0.35), 50)]), 0.04)
    assert ids_of(out) == [3, 1]
