"""The detections container's room for what models run on each object found: the attributes
stay with their boxes through any selection, are checked for length, are copied (never shared)
when one is added, and reach the frame event only where there are any, as the schema says."""

from __future__ import annotations

import numpy as np
import pytest

from tests.events_schema import assert_valid_events
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.object_results import Embedding, Label


def three() -> Detections:
    xyxy = np.array([[0, 0, 10, 10], [5, 5, 20, 20], [30, 30, 40, 50]], np.float32)
    score = np.array([0.9, 0.5, 0.7], np.float32)
    return Detections(xyxy, score, np.array([0, 2, 0], np.int32), ("person", "bicycle", "car"))


def test_an_attribute_stays_with_its_box_through_masks_and_indices() -> None:
    red = Label("red", 0.8)
    dets = three().with_attributes(2, "colour", red)
    assert [dict(a) for a in dets.attributes] == [{}, {}, {"colour": red}]  # type: ignore[union-attr]
    kept = dets[np.array([True, False, True])]
    assert kept.attributes is not None and kept.attributes[1] == {"colour": red}
    best = dets[np.argsort(-dets.score)]  # 0.9, 0.7 (the red one), 0.5
    assert best.attributes is not None
    assert best.attributes[1] == {"colour": red}
    assert dets[np.array([], np.int64)].attributes is not None


def test_adding_one_copies_and_keeps_the_others() -> None:
    ana = Embedding(np.ones(4, np.float32) / 2, "ana", 0.71)
    first = three().with_attributes(0, "face", ana)
    blue, other = Label("blue", 0.6), Label("green", 0.5)
    second = first.with_attributes(0, "colour", blue).with_attributes(1, "colour", other)
    assert first.attributes is not None and first.attributes[0] == {"face": ana}
    assert second.attributes is not None
    assert second.attributes[0] == {"face": ana, "colour": blue}
    assert second.attributes[1] == {"colour": other} and second.attributes[2] == {}
    assert three().attributes is None  # none until a node sets one


def test_a_result_is_a_typed_value_not_a_dict() -> None:
    with pytest.raises(
        TypeError, match=r"^colour: an object's result is an ObjectResult .*not dict"
    ):
        three().with_attributes(0, "colour", {"label": "red"})  # type: ignore[arg-type]


def test_attributes_of_another_length_are_refused() -> None:
    dets = three()
    with pytest.raises(ValueError, match=r"attributes: expected shape \(3,\), got \(2,\)"):
        dets.replace(attributes=np.empty(2, dtype=object))


def test_the_event_carries_attributes_only_where_there_are_any() -> None:
    dets = three().with_attributes(1, "colour", Label("red", 0.80004))
    records = dets.to_records()
    assert "attributes" not in records[0] and "attributes" not in records[2]
    assert records[1]["attributes"] == {"colour": {"label": "red", "score": 0.8}}
    assert "attributes" not in three().to_records()[1]
    event = {"event": "frame", "source_id": "cam", "seq": 0, "pts": 0.0,
             "time": "2026-12-05T00:00:00.000Z", "detections": records}  # fmt: skip
    assert_valid_events([event])


def test_records_round_boxes_to_2_places_scores_to_4_and_name_unknown_ids() -> None:
    dets = Detections(
        np.array([[1.234567, 2.005, 3.999, 4.5]], np.float32),
        np.array([0.123456], np.float32),
        np.array([7], np.int32),
        ("person",),
        track_id=np.array([42], np.int64),
    )
    (record,) = dets.to_records()
    assert record["xyxy"] == [round(float(np.float32(v)), 2) for v in (1.234567, 2.005, 3.999, 4.5)]
    assert record["score"] == 0.1235 and record["class_id"] == 7 and record["track_id"] == 42
    assert record["class_name"] == "7"  # an id past the names: its number
    assert type(record["class_id"]) is int and type(record["track_id"]) is int
    assert type(record["score"]) is float
    assert three().to_records()[1]["class_name"] == "car"
    assert "track_id" not in three().to_records()[0]


def test_rounded_float32_arrays_equal_python_round_number_by_number() -> None:
    from vapipe.pipeline.detections import rounded

    rng = np.random.default_rng(7)
    halves = rng.integers(-400_000, 400_000, 20_000) / 200  # x.xx5 exactly: ties to even
    values = np.concatenate([rng.uniform(-5000, 5000, 50_000), halves, [0.125, -0.005, 1e-9]])
    for digits in (2, 4):
        as32 = values.astype(np.float32)
        expected = [round(v, digits) for v in as32.tolist()]
        got = rounded(as32, digits)
        assert got == expected and [repr(v) for v in got] == [repr(v) for v in expected]
    boxes = rng.uniform(0, 2000, (5, 4)).astype(np.float32)
    assert rounded(boxes, 2) == [[round(v, 2) for v in row] for row in boxes.tolist()]


def test_rounded_other_types_round_each_number() -> None:
    from vapipe.pipeline.detections import rounded

    # float64 * 100 is not exact: Python's decimal rounding, number by number
    assert rounded(np.array([[2.675, 0.125], [1.005, 3.0]]), 2) == [[2.67, 0.12], [1.0, 3.0]]
    assert rounded(np.array([2.675]), 2) != np.round(np.array([2.675]), 2).tolist()
    assert rounded(np.array([3, 4], np.int32), 2) == [3, 4]
    assert rounded(np.array([0.123456], np.float32), 5) == [round(float(np.float32(0.123456)), 5)]
