"""Which tracks left the picture (track/edges.py): a last box touching an edge, or a predicted
centre past one; and a lost track that left is gone, a tracked one is not."""

from __future__ import annotations

import numpy as np

from vapipe.stages.track.bytetrack import LOST
from vapipe.stages.track.classes import TRACKED
from vapipe.stages.track.edges import EdgeRules


def tracks(centres: list, boxes: list, states: list, size=(200, 100)) -> EdgeRules:  # type: ignore[no-untyped-def]
    rules = EdgeRules()
    rules.frame_size = size
    rules.mean = np.zeros((len(centres), 8))
    rules.mean[:, :2] = centres
    rules.mean[:, 2:4] = 7.0  # aspect and height: never read as a centre
    rules.last_box = np.array(boxes, np.float64).reshape(len(boxes), 4)
    rules.state = np.array(states, np.int8)
    return rules


INSIDE = (50, 30, 70, 60)


def test_a_last_box_touching_any_edge_left_the_picture() -> None:
    boxes = [INSIDE, (1, 30, 20, 60), (50, 0.5, 70, 60), (150, 30, 199, 60), (50, 30, 70, 99.5)]
    rules = tracks([(60, 45)] * 5, boxes, [LOST] * 5)
    assert rules._at_edge().tolist() == [False, True, True, True, True]
    assert rules._left().tolist() == [False, True, True, True, True]


def test_a_predicted_centre_past_any_edge_left_the_picture() -> None:
    centres = [(60, 45), (-1, 45), (201, 45), (60, -1), (60, 101), (-1, -1), (0, 45), (200, 100)]
    rules = tracks(centres, [INSIDE] * 8, [LOST] * 8)
    assert rules._left().tolist() == [False, True, True, True, True, True, False, False]


def test_only_a_lost_track_that_left_is_gone() -> None:
    rules = tracks([(60, 45), (-5, 45), (-5, 45)], [INSIDE] * 3, [LOST, LOST, TRACKED])
    assert rules._gone().tolist() == [False, True, False]


def test_without_the_frame_size_no_track_left() -> None:
    rules = tracks([(-5, 45)], [(0, 0, 10, 10)], [LOST])
    rules.frame_size = None
    assert rules._left().tolist() == [False] and rules._at_edge().tolist() == [False]
