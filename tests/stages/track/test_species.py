"""Issue 49's rules on synthetic trajectories: a track is continued only by detections of its
class group (a dog never takes a person's track, a car called a truck stays one car), a box
is labelled with its own group's class, and an object that left the picture is gone (what
comes back in there is another object; a track whose prediction left the picture expires
soon)."""

from __future__ import annotations

import numpy as np

from tests.stages.track.test_bytetrack import box_at
from vapipe.pipeline.detections import Detections
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.classes import ClassGroups
from vapipe.stages.track.config import CONFUSABLE, TrackConfig

NAMES = ("person", "bicycle", "car", "motorcycle", "cat", "dog", "truck", "horse")
PERSON, BICYCLE, CAR, MOTORCYCLE, CAT, DOG, TRUCK, HORSE = range(8)


def seen(boxes: list, classes: list, scores: list | None = None) -> Detections:
    count = len(boxes)
    return Detections(
        np.array(boxes, np.float32).reshape(count, 4),
        np.array(scores or [0.9] * count, np.float32),
        np.array(classes, np.int32),
        NAMES,
    )


def track(frames: list[Detections], config: TrackConfig | None = None, size=(640, 360)):  # type: ignore[no-untyped-def]
    """(ids, class names) per frame."""
    tracker = ByteTracker(config or TrackConfig())
    tracker.frame_size = size
    ids, names = [], []
    for index, frame in enumerate(frames):
        out = tracker.update(frame, index / 25)
        assert out.track_id is not None
        ids.append(out.track_id.tolist())
        names.append([NAMES[c] for c in out.class_id.tolist()])
    return ids, names


def person_then(other: int, frames: int = 6) -> list[Detections]:
    """A person standing at x = 200 for 12 frames; then, on the same box, the detector sure
    of ``other`` (a dog sitting where the person stood; or the same object named again)."""
    box = box_at(200, 100, 60, 100)
    before = [seen([box], [PERSON]) for _ in range(12)]
    return before + [seen([box], [other]) for _ in range(frames)]


def test_a_dog_where_a_person_was_is_a_new_track_labelled_dog() -> None:
    ids, names = track(person_then(DOG))
    assert ids[11] == [1] and names[11] == ["person"]
    assert ids[-1] == [2], "the dog took the person's track"
    assert names[-1] == ["dog"]  # never the person's vote carried over


def test_classes_of_one_group_continue_one_track() -> None:
    # A car the detector calls a truck for a while stays one car; a cat called a dog, one cat.
    car = [seen([box_at(100 + 4 * i, 50, 80, 40)], [CAR]) for i in range(12)]
    truck = [seen([box_at(148 + 4 * i, 50, 80, 40)], [TRUCK], [0.8]) for i in range(4)]
    ids, names = track(car + truck)
    assert ids[-1] == [1] and names[-1] == ["car"]  # the vote: 12 x 0.9 car, 4 x 0.8 truck
    cat = [seen([box_at(300, 200, 50, 40)], [CAT]) for _ in range(5)]
    dog = [seen([box_at(300, 200, 50, 40)], [DOG], [0.6]) for _ in range(3)]
    assert track(cat + dog)[0][-1] == [1]


def test_without_groups_classes_are_strict_and_unaware_tracks_take_any() -> None:
    car = [seen([box_at(100, 50, 80, 40)], [CAR]) for _ in range(5)]
    truck = [seen([box_at(100, 50, 80, 40)], [TRUCK]) for _ in range(3)]
    assert track(car + truck, TrackConfig(confusable=[]))[0][-1] == [2]
    ids, names = track(person_then(DOG), TrackConfig(class_aware=False))
    assert ids[-1] == [1] and names[-1] == ["person"]  # the old rule: the vote decides


def test_an_unsure_other_group_on_a_tracked_box_is_the_detector_hesitating() -> None:
    # A dog called a person (0.4) for two frames keeps its track and its label; called a
    # person surely (0.6), it is another object. On the box of a track lost a moment ago,
    # even an unsure other group is another object.
    box = box_at(200, 100, 60, 100)
    dog = [seen([box], [DOG]) for _ in range(5)]
    unsure = [seen([box], [PERSON], [0.4]) for _ in range(2)]
    ids, names = track(dog + unsure + dog[:1])
    assert ids[5:] == [[1]] * 3 and names[5:] == [["dog"]] * 3
    ids, names = track([*dog, seen([box], [PERSON], [0.6])])
    assert ids[-1] == [2] and names[-1] == ["person"]
    ids, _ = track(dog + [seen([], [])] * 2 + unsure)
    assert ids[-1] == [2]
    assert track(dog + unsure, TrackConfig(class_change_score=0.3))[0][-1] == [2]


def test_a_track_seen_once_takes_the_group_the_detector_is_then_sure_of() -> None:
    # Called a person (0.32: too unsure to be shown) on the frame it appeared, a dog (0.6)
    # from the next: one track, a dog, with no vote of the person left.
    box = box_at(200, 160, 48, 88)
    empty = seen([], [])  # a source's first frame confirms what it shows at once
    frames = [empty, seen([box], [PERSON], [0.32])] + [seen([box], [DOG], [0.6])] * 3
    tracker = ByteTracker(TrackConfig())
    tracker.frame_size = (640, 360)
    ids, names = track(frames)
    assert ids[1:] == [[-1]] + [[1]] * 3 and names[-1] == ["dog"]
    for index, frame in enumerate(frames):
        tracker.update(frame, index / 25)
    assert tracker.votes[0, PERSON] == 0 and tracker.votes[0, DOG] > 0
    # Seen twice as a person, it is one: the sure dog is another object.
    twice = [empty, *[seen([box], [PERSON], [0.43])] * 2, seen([box], [DOG], [0.6])]
    assert track(twice)[0][-1] == [2]


def test_a_track_shown_once_under_one_group_never_shows_another() -> None:
    # Called a person surely enough to be shown at once (0.43 >= confirm_score), then a
    # dog (0.6): the dog is a new track; id 1 stays a person (random_201, diagonal_ends_b).
    box = box_at(200, 160, 48, 88)
    frames = [seen([], []), seen([box], [PERSON], [0.43])] + [seen([box], [DOG], [0.6])] * 3
    ids, names = track(frames)
    assert ids[1] == [1] and names[1] == ["person"]
    assert ids[-1] == [2] and names[-1] == ["dog"]
    # Unaware of classes, the old rule: one track, whose label the votes turn to dog.
    unaware = track(frames, TrackConfig(class_aware=False))
    assert unaware[0][-1] == [1] and unaware[1][-1] == ["dog"]


def test_a_box_named_by_two_groups_keeps_the_name_of_the_track_that_is_there() -> None:
    # A dog the detector also calls a person on one frame, more surely (0.36 against 0.21):
    # the dog's track goes on, under its name, and the person starts nothing.
    dog = [seen([box_at(100 + 6 * i, 160, 48, 88)], [DOG], [0.5]) for i in range(10)]
    both = [seen([box_at(160, 160, 48, 88)] * 2, [PERSON, DOG], [0.36, 0.21])]
    after = [seen([box_at(166 + 6 * i, 160, 48, 88)], [DOG], [0.5]) for i in range(3)]
    ids, names = track(dog + both + after)
    assert ids[10] == [-1, 1] and names[10][1] == "dog"
    assert ids[-1] == [1] and names[-1] == ["dog"]
    # A dog held in someone's arms is no duplicate (IoU 0.45): two objects, two tracks.
    person, held = box_at(200, 100, 60, 120), box_at(210, 130, 40, 60)
    ids, names = track([seen([person, held], [PERSON, DOG], [0.9, 0.8]) for _ in range(4)])
    assert ids[-1] == [1, 2] and names[-1] == ["person", "dog"]
    car, truck = box_at(200, 100, 80, 40), box_at(200, 100, 80, 38)
    merged = [seen([car, truck], [CAR, TRUCK], [0.9, 0.8]) for _ in range(4)]
    assert track(merged)[0][-1] == [1, -1]  # one vehicle named twice


def test_class_groups_number_each_class_and_each_class_of_no_group_alone() -> None:
    groups = ClassGroups(CONFUSABLE)
    numbers = groups.of(np.array([CAR, TRUCK, CAT, DOG, PERSON, BICYCLE, MOTORCYCLE, 12]), NAMES)
    car, truck, cat, dog, person, bicycle, motorcycle, beyond = numbers.tolist()
    assert car == truck and cat == dog and bicycle == motorcycle
    assert len({car, cat, person, bicycle, beyond}) == 5
    assert groups.of(np.array([HORSE]), NAMES).tolist() == [groups.of(np.array([0]), ("cow",))[0]]
    # Other names (another detector's), other numbers: the table follows the names given.
    assert groups.of(np.array([0, 1]), ("dog", "cat")).tolist() == [cat, cat]
    alone = groups.of(np.array([0, 1]), ()).tolist()  # no names: each id a group of its own
    assert alone[0] != alone[1] and not {car, cat, bicycle} & set(alone)


def leaving_left(speed: float = 2.0) -> list[Detections]:
    """A person walking left out of the picture at ``speed`` px a frame, its box clipped by
    the edge as it goes, until 12 px of it are in view."""
    frames, x = [], 60.0
    while x + 40 > 12:
        frames.append(seen([(max(x, 0.0), 100.0, x + 40, 200.0)], [PERSON]))
        x -= speed
    return frames


def test_what_comes_back_in_where_a_track_left_is_another_object() -> None:
    # Five frames after a walker left at the left edge, another walks in there, moving right:
    # it overlaps where the first was predicted, but comes the other way.
    leaving = leaving_left(speed=3.0)
    entering = [seen([(0.0, 100.0, 12.0 + 8 * k, 200.0)], [PERSON]) for k in range(6)]
    gap = [seen([], []) for _ in range(5)]  # 0.2 s: within border_lost_s
    ids, _ = track(leaving + gap + entering)
    assert ids[len(leaving) - 1] == [1] and ids[-6:] == [[2]] * 6, ids[-6:]


def test_found_again_further_along_its_way_it_keeps_its_id() -> None:
    # Half out at the edge, missed for two frames, then seen where it had walked to: the
    # same walker.
    walk = [seen([(max(60.0 - 3 * i, 0.0), 100.0, 100.0 - 3 * i, 200.0)], [PERSON])
            for i in range(23)]  # fmt: skip
    assert walk[-1].xyxy[0].tolist() == [0.0, 100.0, 34.0, 200.0]
    further = [seen([(0.0, 100.0, 25.0, 200.0)], [PERSON])]  # 3 px a frame on
    ids, _ = track(walk + [seen([], [])] * 2 + further)
    assert ids[-1] == [1]


def test_a_track_whose_prediction_left_the_picture_expires_after_border_lost_s() -> None:
    # Last seen 30 px from the left edge, running left at 20 px a frame: it never touched the
    # edge, but its filter puts it past it within frames.
    running = [seen([box_at(400 - 20 * i, 100, 40, 100)], [PERSON]) for i in range(19)]
    tracker = ByteTracker(TrackConfig(lost_s=1.0, border_lost_s=0.3))
    tracker.frame_size = (640, 360)
    for index, frame in enumerate(running):
        tracker.update(frame, index / 25)
    assert not tracker._at_edge().any()
    for index in range(19, 19 + 10):  # 0.4 s of nothing: past border_lost_s, not lost_s
        tracker.update(seen([], []), index / 25)
    assert len(tracker) == 0


def test_a_still_object_hidden_at_the_edge_has_no_direction_to_keep() -> None:
    # Parked at the edge, hidden a moment, seen again in place: the same object.
    parked = [seen([box_at(0, 100, 80, 40)], [CAR]) for _ in range(10)]
    again = [seen([box_at(0, 100, 80, 40)], [CAR])]
    ids, _ = track(parked + [seen([], [])] * 3 + again)
    assert ids[-1] == [1]


def test_the_edges_of_hesitation_and_of_being_sure() -> None:
    # Exactly class_change_score is sure: another object. An unsure name on the last box
    # (IoU 0.5 or more) continues the track; just off it, it is another object.
    box = box_at(200, 100, 60, 100)
    dog = [seen([box], [DOG]) for _ in range(5)]
    assert track([*dog, seen([box], [PERSON], [0.5])])[0][-1] == [2]

    def inside(iou: float) -> tuple[float, float, float, float]:
        side = iou**0.5  # a box of the same shape inside: IoU is the ratio of areas
        return (200.0, 100.0, 200 + 60 * side, 100 + 100 * side)

    ids, names = track([*dog, seen([inside(0.505)], [PERSON], [0.4])])
    assert ids[-1] == [1] and names[-1] == ["dog"]
    assert track([*dog, seen([inside(0.495)], [PERSON], [0.4])])[0][-1] == [2]


def test_classes_past_the_names_are_groups_of_their_own() -> None:
    groups = ClassGroups(CONFUSABLE)
    named = set(groups.of(np.arange(len(NAMES)), NAMES).tolist())
    past = groups.of(np.array([8, 9, 30]), NAMES).tolist()
    assert len(set(past)) == 3 and not set(past) & named
    assert groups.of(np.array([9]), NAMES).tolist() == [past[1]]  # the same class, the same
