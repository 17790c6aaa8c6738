"""Box overlaps, the one place they are computed, on boxes placed for exact answers: apart,
touching, inside, smaller than a pixel, and without area."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.stages.boxes import box_iou, intersection_over_first, iou_matrix


def boxes(*rows: tuple[float, float, float, float]) -> np.ndarray:
    return np.array(rows, np.float64)


def test_boxes_apart_or_touching_do_not_overlap() -> None:
    base = boxes((0, 0, 10, 10))
    others = boxes(
        (20, 0, 30, 10),  # beside it, level: apart in x only
        (0, 20, 10, 30),  # below it: apart in y only
        (10, 0, 20, 10),  # sharing its right edge
        (0, 10, 10, 20),  # sharing its bottom edge
    )
    assert iou_matrix(base, others).tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert intersection_over_first(base, others).tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_overlaps_are_exact() -> None:
    a = boxes((0, 0, 10, 10), (0, 0, 4, 4))
    b = boxes((5, 0, 15, 10), (0, 0, 10, 10))
    assert iou_matrix(a, b) == pytest.approx(np.array([[50 / 150, 1.0], [0.0, 16 / 100]]))
    # How much of each box of a lies inside each of b: the small one wholly inside the big one.
    assert intersection_over_first(a, b) == pytest.approx(np.array([[0.5, 1.0], [0.0, 1.0]]))
    assert box_iou(a[0], b) == pytest.approx([50 / 150, 1.0])


def test_boxes_smaller_than_a_pixel_overlap_as_any_others() -> None:
    tiny = boxes((0.0, 0.0, 0.5, 0.5))
    assert iou_matrix(tiny, tiny).tolist() == [[1.0]]
    assert intersection_over_first(tiny, boxes((0, 0, 1, 1))).tolist() == [[1.0]]
    assert iou_matrix(tiny, boxes((0.25, 0.0, 0.75, 0.5)))[0, 0] == pytest.approx(1 / 3)


def test_boxes_without_area_overlap_nothing() -> None:
    flat = boxes((5, 5, 5, 5), (0, 3, 10, 3))
    assert iou_matrix(flat, flat).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert intersection_over_first(flat, boxes((0, 0, 10, 10))).tolist() == [[0.0], [0.0]]
