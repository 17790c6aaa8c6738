"""What the video sink draws for tracked objects and analytics: ids, trails, zones, lines."""

from __future__ import annotations

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import FrameAnalytics
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.counting import SourceAnalytics
from vapipe.stages.analytics.geometry import compile_geometry
from vapipe.stages.media.draw import draw_analytics, draw_trails
from vapipe.stages.sinks.video import Trails


def test_zone_is_tinted_inside_only_and_the_line_is_drawn() -> None:
    config = AnalyticsConfig.model_validate(
        {
            "lines": [{"name": "gate", "start": [150, 10], "end": [150, 190]}],
            "zones": [{"name": "bay", "polygon": [[10, 10], [100, 10], [100, 100], [10, 100]]}],
        }
    )
    lines, zones = compile_geometry(config, "cam", 200, 200)
    state = SourceAnalytics(config, lines, zones)
    canvas = np.full((200, 200, 3), 100, np.uint8)
    draw_analytics(canvas, FrameAnalytics(state.summary(), tuple(lines), tuple(zones)))
    assert not np.array_equal(canvas[60, 60], [100, 100, 100]), "the zone was not filled"
    assert np.array_equal(canvas[150, 60], [100, 100, 100]), "paint outside the zone"
    assert canvas[150, 150].tolist() == [0, 220, 255], "the line is missing"
    assert np.array_equal(canvas[150, 110], [100, 100, 100])


def test_trails_follow_each_track_and_forget_gone_ones() -> None:
    trails = Trails(length=5)
    for step in range(8):
        x = 20.0 + 10 * step
        dets = Detections(
            np.array([[x, 50, x + 10, 80]], np.float32),
            np.array([0.9], np.float32),
            np.array([0], np.int32),
            track_id=np.array([7], np.int64),
        )
        points = trails.update(dets)
    assert list(points) == [7] and len(points[7]) == 5
    assert points[7][-1] == (95, 80), "the trail ends at the last bottom centre"
    canvas = np.zeros((120, 200, 3), np.uint8)
    draw_trails(canvas, points)
    assert canvas[80, 70:90].any(), "no trail drawn between the last points"
    empty = Detections.empty()
    for _ in range(6):
        points = trails.update(empty)
    assert points == {}, "a track gone longer than the trail is still drawn"


def test_a_box_shows_what_models_on_the_object_said_and_the_boxes_inside_it() -> None:
    from vapipe.pipeline.object_results import BoxesInside, Embedding, FoundBox, Label
    from vapipe.stages.media.draw import attribute_tags, draw_detections

    vector = np.ones(256, np.float32) / 16
    face = FoundBox(np.array([40, 40, 60, 60], np.float32), 0.9, "face")
    held = {"kind": Label("cab", 0.9), "who": Embedding(vector, "alice", 0.7),
            "face": BoxesInside((face,)), "reid": Embedding(vector)}  # fmt: skip
    assert attribute_tags(held) == "cab alice"
    assert attribute_tags(None) == "" and attribute_tags({"reid": Embedding(vector)}) == ""
    image = np.zeros((120, 400, 3), np.uint8)
    plain = Detections(
        np.array([[20, 30, 100, 110]], np.float32), np.array([0.8], np.float32),
        np.array([0], np.int32), ("person",), np.array([1], np.int64),
    )  # fmt: skip
    attributes = np.empty(1, dtype=object)
    attributes[0] = held
    with_attributes = plain.replace(attributes=attributes)
    before = draw_detections(image, plain)
    after = draw_detections(image, with_attributes)
    inside = np.zeros((120, 400), bool)
    inside[38:63, 38:63] = True
    assert (after[inside] != before[inside]).any(axis=1).sum() > 40  # the face's rectangle
    label_row = slice(0, 26)
    assert (after[label_row] != before[label_row]).any()  # the longer label
    assert not draw_detections(image, with_attributes, labels=False)[label_row].any()


def test_labels_of_neighbours_never_cover_one_another_where_there_is_room() -> None:
    from vapipe.stages.media.draw import class_color, draw_detections, label_top

    # Two people side by side, their boxes' tops level: the second label, above its box, would
    # cover the first's; it goes just inside its box's top instead.
    placed: list[tuple[int, int, int, int]] = []
    first = label_top(100, 120, 16, (100, 300), 480, placed)
    assert first == 84
    placed.append((100, first, 220, first + 16))
    second = label_top(140, 120, 16, (100, 300), 480, placed)
    assert second == 100
    placed.append((140, second, 260, second + 16))
    third = label_top(150, 120, 16, (100, 300), 480, placed)
    assert third == 300  # below the box: above and the top inside are taken
    placed.append((150, third, 270, third + 16))
    assert label_top(160, 120, 16, (100, 300), 480, placed) == 284
    placed.append((160, 284, 280, 300))
    assert label_top(170, 120, 16, (100, 300), 480, placed) == 84  # all taken: above
    assert label_top(500, 50, 16, (100, 300), 480, placed) == 84  # no neighbour: above
    assert label_top(0, 50, 16, (0, 470), 480, []) == 0  # kept in the picture
    assert label_top(0, 50, 16, (0, 470), 480, [(0, 0, 60, 16)]) == 464  # below, in the picture
    # Drawn: each box in its track's colour, the labels in two rows.
    boxes = np.array([[100, 100, 180, 300], [140, 100, 220, 300]], np.float32)
    dets = Detections(boxes, np.array([0.9, 0.8], np.float32), np.zeros(2, np.int32),
                      ("person",), track_id=np.array([1, 2]))  # fmt: skip
    canvas = draw_detections(np.zeros((480, 640, 3), np.uint8), dets)
    assert tuple(canvas[90, 102]) == class_color(1)  # the first label, above its box
    assert tuple(canvas[106, 142]) == class_color(2)  # the second, inside its box's top


def test_a_plate_is_in_the_boxs_caption() -> None:
    from vapipe.pipeline.object_results import Label, Plate
    from vapipe.stages.media.draw import attribute_tags

    held = {"kind": Label("cab", 0.9), "plates": Plate("KX4921", 0.99, None, "Alice")}
    assert attribute_tags(held) == "cab KX4921 Alice"
