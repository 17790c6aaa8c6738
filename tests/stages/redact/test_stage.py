"""The redact node on frames made here: what it hides (objects by class, the boxes found
inside them, the whole object where those are missing, fixed areas, tracks held a moment),
that the frame it passes on is a copy and the original keeps its pixels, and its bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.pipeline.object_results import BoxesInside, FoundBox
from vapipe.pipeline.stage import StageContext
from vapipe.stages.objects.config import DetectInsideConfig
from vapipe.stages.objects.detect_inside import DetectInsideStage
from vapipe.stages.redact.config import RedactConfig
from vapipe.stages.redact.stage import RedactStage

NAMES = ("person", "car")
WIDTH, HEIGHT = 200, 100


def frame(
    boxes: list[list[float]],
    classes: list[int],
    tracks: list[int] | None = None,
    faces: dict[int, list[list[float]]] | None = None,
    pts: float = 0.0,
    source_id: str = "cam",
) -> Frame:
    """A textured frame with these objects; ``faces``: object index -> boxes found inside."""
    image = np.random.default_rng(int(pts * 100)).integers(0, 256, (HEIGHT, WIDTH, 3), np.uint8)
    count = len(boxes)
    attributes = None
    if faces is not None:
        attributes = np.empty(count, dtype=object)
        for index in range(count):
            found = faces.get(index)
            inner = tuple(FoundBox(np.array(b, np.float32), 0.9, "face") for b in found or ())
            attributes[index] = {} if found is None else {"face": BoxesInside(inner)}
    dets = Detections(
        np.array(boxes, np.float32).reshape(-1, 4), np.full(count, 0.9, np.float32),
        np.array(classes, np.int32), NAMES,
        track_id=None if tracks is None else np.array(tracks, np.int64), attributes=attributes,
    )  # fmt: skip
    info = StreamInfo(source_id, "x", WIDTH, HEIGHT, None)
    return Frame(source_id, round(pts * 10), pts, 0.0, image, info, detections=dets)


def stage(inside: bool = False, on_classes: list[str] | None = None, **keys: Any) -> RedactStage:
    node = RedactStage("redact", RedactConfig(**({"inside": "face"} if inside else {}), **keys))
    if inside:
        node.bind(
            DetectInsideStage("face", DetectInsideConfig(model="yunet", on_classes=on_classes))
        )
    node.open(StageContext("redact", source_ids=["cam", "door"]))
    return node


def changed(before: Frame, after: Frame) -> np.ndarray:
    """Pixels that differ (H x W bool)."""
    return (before.image != after.image).any(axis=2)


def only_in(mask: np.ndarray, x0: int, y0: int, x1: int, y1: int) -> bool:
    inside = np.zeros_like(mask)
    inside[y0:y1, x0:x1] = True
    return bool(mask[y0:y1, x0:x1].all() and not mask[~inside].any())


def test_objects_of_the_classes_are_hidden_whole_and_nothing_else() -> None:
    node = stage(classes=["car"], method="fill", grow=0.0)
    before = frame([[10, 10, 50, 60], [100, 20, 150, 80]], [0, 1])
    (after,) = node.process(before)
    assert only_in(changed(before, after), 100, 20, 150, 80)
    assert node.stats()["whole_objects"] == 1


def test_the_passed_frame_is_a_copy_and_the_original_keeps_its_pixels() -> None:
    node = stage(classes=["person"], method="fill", grow=0.0)
    before = frame([[10, 10, 50, 60]], [0])
    original = before.image.copy()
    before.yuv = np.zeros((HEIGHT * 3 // 2, WIDTH), np.uint8)  # decoded planes held too
    before.__dict__["_image"] = original.copy()
    (after,) = node.process(before)
    assert after is not before
    assert (before.image == original).all()  # what other branches see is untouched
    assert after.yuv is None  # the planes hold the original picture: not passed on
    assert after.detections is before.detections and after.events is before.events


def test_a_frame_with_nothing_to_hide_passes_as_it_is() -> None:
    node = stage(classes=["car"])
    before = frame([[10, 10, 50, 60]], [0])
    (after,) = node.process(before)
    assert after is before


def test_boxes_found_inside_are_hidden_not_the_object() -> None:
    node = stage(inside=True, method="fill", grow=0.0)
    before = frame([[10, 10, 90, 90]], [0], faces={0: [[30, 15, 50, 35]]})
    (after,) = node.process(before)
    assert only_in(changed(before, after), 30, 15, 50, 35)


def test_an_object_without_its_inner_boxes_is_hidden_whole_by_default() -> None:
    node = stage(inside=True, on_classes=["person"], method="fill", grow=0.0)
    before = frame([[10, 10, 90, 90], [120, 10, 190, 90]], [0, 1], faces={})
    (after,) = node.process(before)
    # the person (looked in, no face found) whole; the car (never looked in) untouched
    assert only_in(changed(before, after), 10, 10, 90, 90)
    # ``missing = "none"``: hidden only where a face was found
    (kept,) = stage(inside=True, missing="none", method="fill").process(before)
    assert kept is before


def test_boxes_are_grown_by_a_fraction_of_their_size() -> None:
    node = stage(classes=["person"], method="fill", grow=0.25)
    before = frame([[40, 20, 80, 60]], [0])
    (after,) = node.process(before)
    assert only_in(changed(before, after), 30, 10, 90, 70)


def test_a_track_missing_from_a_frame_stays_hidden_for_hold_s() -> None:
    node = stage(classes=["person"], method="fill", grow=0.0, hold_s=0.5)
    node.process(frame([[10, 10, 50, 60]], [0], tracks=[7], pts=1.0))
    empty_soon = frame([], [], tracks=[], pts=1.4)
    (after,) = node.process(empty_soon)
    assert only_in(changed(empty_soon, after), 10, 10, 50, 60)
    empty_later = frame([], [], tracks=[], pts=1.6)  # 0.6 s after it was last seen
    (later,) = node.process(empty_later)
    assert later is empty_later
    assert node.stats()["held"] == 1


def test_areas_in_fractions_or_pixels_per_source() -> None:
    node = stage(
        areas=[
            {"polygon": [[0, 0], [0.5, 0], [0.5, 0.5], [0, 0.5]], "normalized": True},
            {"polygon": [[150, 50], [200, 50], [200, 100], [150, 100]], "source": "door"},
        ],
        method="fill",
    )
    cam = frame([], [])
    (after,) = node.process(cam)
    assert only_in(changed(cam, after), 0, 0, 100, 50)  # the first only: it is not "door"
    door = frame([], [], source_id="door")
    (door_after,) = node.process(door)
    assert changed(door, door_after)[60, 160] and changed(door, door_after)[10, 10]


def test_an_area_outside_the_frame_is_an_error_naming_it() -> None:
    node = stage(areas=[{"polygon": [[300, 10], [400, 10], [400, 90]]}])
    with pytest.raises(ConfigError) as caught:
        node.process(frame([], []))
    assert caught.value.key == "areas[0]" and caught.value.node == "redact"
    assert "outside" in str(caught.value) and "200x100" in str(caught.value)
    assert "normalized" in str(caught.value)  # the likely mistake: fractions given as pixels


def test_an_area_for_a_source_not_in_the_run_is_refused() -> None:
    config = RedactConfig(areas=[{"polygon": [[0, 0], [5, 0], [5, 5]], "source": "gate"}])
    with pytest.raises(ConfigError) as caught:
        RedactStage.check_for_sources(config, ["cam"])
    assert caught.value.key == "areas[0].source"
    RedactStage.check_for_sources(config, ["cam", "gate"])


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ValidationError, match="nothing to redact"):
        RedactConfig()
    with pytest.raises(ValidationError, match="no area"):
        RedactConfig(areas=[{"polygon": [[0, 0], [1, 1], [2, 2]]}])
    with pytest.raises(ValidationError, match="color"):
        RedactConfig(classes=["person"], color=[0, 0, 300])


def test_inside_must_name_a_detect_inside_node() -> None:
    node = RedactStage("redact", RedactConfig(inside="track"))
    with pytest.raises(ConfigError) as caught:
        node.bind(object())
    assert caught.value.key == "inside"
    assert RedactStage.reads_results_of(node.config) == ("track",)


def test_fill_uses_the_rgb_colour_given() -> None:
    node = stage(classes=["person"], method="fill", color=[255, 0, 0], grow=0.0)
    (after,) = node.process(frame([[10, 10, 50, 60]], [0]))
    assert after.image[30, 30].tolist() == [0, 0, 255]  # BGR


def test_a_removed_source_forgets_its_tracks() -> None:
    node = stage(classes=["person"], hold_s=5.0)
    node.process(frame([[10, 10, 50, 60]], [0], tracks=[1]))
    node.handle_message(Message("cam", "source_removed", 0.0))
    empty = frame([], [], pts=0.1)
    assert node.process(empty) == (empty,)


def test_it_is_the_registered_redact_type_and_redacts() -> None:
    from vapipe.pipeline.registry import lookup

    assert lookup("redact") is RedactStage
    assert RedactStage.redacts and not RedactStage.writes_pictures(RedactConfig(classes=["car"]))


def test_its_counts_say_what_it_did() -> None:
    node = stage(inside=True, method="fill")
    node.process(frame([[10, 10, 90, 90]], [0], faces={}))  # no face: the person whole
    node.process(frame([[10, 10, 90, 90]], [0], faces={0: [[30, 15, 50, 35]]}, pts=0.1))
    node.process(frame([], [], pts=0.2))
    assert node.stats() == {
        "frames": 3, "regions": 2, "whole_objects": 1, "held": 0, "on_device": 0
    }  # fmt: skip


def test_other_messages_keep_the_held_tracks() -> None:
    node = stage(classes=["person"], method="fill", grow=0.0, hold_s=5.0)
    node.process(frame([[10, 10, 50, 60]], [0], tracks=[1]))
    node.handle_message(Message("cam", "source_down", 0.0))
    empty = frame([], [], pts=0.1)
    (after,) = node.process(empty)
    assert after is not empty  # still hidden where it was


def test_an_area_of_another_source_listed_first_does_not_stop_the_rest() -> None:
    node = stage(
        areas=[
            {"polygon": [[150, 50], [200, 50], [200, 100], [150, 100]], "source": "door"},
            {"polygon": [[0, 0], [40, 0], [40, 40], [0, 40]]},
        ],
        method="fill",
    )
    cam = frame([], [])
    (after,) = node.process(cam)
    assert only_in(changed(cam, after), 0, 0, 40, 40)


def test_a_frame_without_detections_gets_its_areas() -> None:
    node = stage(areas=[{"polygon": [[0, 0], [40, 0], [40, 40], [0, 40]]}], method="fill")
    bare = frame([], [])
    bare.detections = None
    (after,) = node.process(bare)
    assert only_in(changed(bare, after), 0, 0, 40, 40)


def test_which_tracks_are_held_and_for_how_long() -> None:
    node = stage(classes=["person"], method="fill", grow=0.0, hold_s=0.5)
    # track 0 is a track (held); -1 is an untracked detection (not held)
    node.process(frame([[10, 10, 50, 60], [100, 10, 150, 60]], [0, 0], tracks=[0, -1], pts=1.0))
    (held,) = node.process(empty := frame([], [], tracks=[], pts=1.5))  # exactly hold_s later
    assert only_in(changed(empty, held), 10, 10, 50, 60)
    # two tracks held, one seen again: the other is still hidden where it was
    node = stage(classes=["person"], method="fill", grow=0.0, hold_s=0.5)
    node.process(frame([[10, 10, 50, 60], [100, 10, 150, 60]], [0, 0], tracks=[1, 2], pts=1.0))
    again = frame([[100, 10, 150, 60]], [0], tracks=[2], pts=1.2)
    (after,) = node.process(again)
    mask = changed(again, after)
    assert mask[30, 30] and mask[30, 120]
    # the same pts again (another frame at that time) keeps it; time going back drops it
    (same,) = node.process(same_time := frame([], [], tracks=[], pts=1.2))
    assert changed(same_time, same)[30, 30] and changed(same_time, same)[30, 120]
    back = frame([], [], tracks=[], pts=0.5)
    assert node.process(back) == (back,)
