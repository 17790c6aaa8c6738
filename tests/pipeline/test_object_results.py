"""Object nodes' results as typed values, and as the events carry them (the JSON the schema
gives: a label and score to 4 places, boxes to hundredths with landmarks to tenths, a name and
similarity, the vector's size and, where the node writes it, the vector to 5 places; analytics
events never carry the vector)."""

from __future__ import annotations

import numpy as np

from tests.events_schema import assert_valid_events
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.object_results import BoxesInside, Embedding, FoundBox, Label, as_events
from vapipe.stages.events.records import frame_records

VECTOR = np.array([0.6, 0.8, 0.0], np.float32)
FINE = np.array([0.1234567, 0.9923456], np.float64)


def test_a_label_rounds_its_score_and_is_its_tag() -> None:
    label = Label("cab", 0.912345)
    assert label.as_event() == {"label": "cab", "score": 0.9123} and label.tag == "cab"


def test_boxes_inside_round_and_keep_landmarks_where_found() -> None:
    face = FoundBox(
        np.array([1.234, 2.345, 10.0, 20.999], np.float32), 0.87654, "face",
        np.array([[3.14159, 4.0], [5.54, 6.06]], np.float32),
    )  # fmt: skip
    plate = FoundBox(np.array([0, 0, 4, 2], np.float32), 0.5, "plate")
    inside = BoxesInside((face, plate))
    assert inside.best is face and inside.tag is None and BoxesInside(()).best is None
    assert inside.as_event() == {
        "boxes": [
            {"xyxy": [1.23, 2.35, 10.0, 21.0], "score": 0.8765, "label": "face",
             "landmarks": [[3.1, 4.0], [5.5, 6.1]]},
            {"xyxy": [0.0, 0.0, 4.0, 2.0], "score": 0.5, "label": "plate"},
        ]
    }  # fmt: skip


def test_an_embedding_shows_its_name_its_size_and_its_vector_where_written() -> None:
    named = Embedding(VECTOR, "ana", 0.712345)
    assert named.as_event() == {"name": "ana", "similarity": 0.7123} and named.tag == "ana"
    assert Embedding(VECTOR).as_event() == {"dims": 3} and Embedding(VECTOR).tag is None
    written = Embedding(VECTOR, "ana", 0.7, written=True)
    assert written.as_event() == {
        "name": "ana", "similarity": 0.7, "dims": 3, "vector": [0.6, 0.8, 0.0]
    }  # fmt: skip
    assert written.as_event(vector=False) == {"name": "ana", "similarity": 0.7, "dims": 3}
    assert as_events({"who": written}, vector=False) == {"who": written.as_event(vector=False)}
    assert Embedding(FINE, written=True).as_event()["vector"] == [0.12346, 0.99235]
    assert Embedding(VECTOR, "ana").as_event() == {"name": "ana", "similarity": 0.0}
    assert "0.6" not in repr(named) and "ana" in repr(named)  # the vector is long: not shown


def test_results_cannot_be_changed_once_made() -> None:
    import dataclasses

    import pytest

    found = FoundBox(np.zeros(4, np.float32), 0.5, "face")
    for value, key in ((Label("a", 0.5), "label"), (BoxesInside((found,)), "boxes"),
                       (found, "label"), (Embedding(VECTOR), "name")):  # fmt: skip
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, key, None)


def test_frame_and_analytics_events_carry_them_as_json_and_pass_the_schema() -> None:
    who = Embedding(VECTOR, "ana", 0.7, written=True)
    dets = Detections(
        np.array([[0, 0, 10, 10]], np.float32), np.array([0.9], np.float32),
        np.zeros(1, np.int32), ("person",), np.array([3], np.int64),
    ).with_attributes(0, "who", who)  # fmt: skip
    frame = Frame("cam", 5, 0.2, 0.0, np.zeros((4, 4, 3), np.uint8),
                  StreamInfo("cam", "x", 4, 4, None), detections=dets)  # fmt: skip
    frame.events.append({"event": "zone_enter", "track_id": 3, "class_name": "person",
                         "zone": "door", "attributes": {"who": who}})  # fmt: skip
    frame.files_of(0).snapshot = "cam/a.jpg"
    records = list(frame_records(frame))
    assert records[0]["detections"][0]["attributes"]["who"]["vector"] == [0.6, 0.8, 0.0]
    assert records[1]["attributes"] == {"who": {"name": "ana", "similarity": 0.7, "dims": 3}}
    assert records[1]["snapshot"] == "cam/a.jpg"
    assert "snapshot" not in frame.events[0]  # the file is the record's, not the event dict's
    assert_valid_events(records)


def test_a_plate_is_shown_but_not_counted_by() -> None:
    from vapipe.pipeline.object_results import Plate

    box = np.array([10.123, 20.0, 90.5, 41.006], np.float32)
    plate = Plate("KX4921", 0.987654, box)
    assert plate.tag is None, "line counts per plate would be one per vehicle"
    assert plate.caption == "KX4921"
    assert plate.as_event() == {"plate": "KX4921", "score": 0.9877,
                                "xyxy": [10.12, 20.0, 90.5, 41.01]}  # fmt: skip
    named = Plate("KX4927", 0.9, None, "Alice", "KX4921")
    assert named.caption == "KX4927 Alice"
    assert named.as_event() == {"plate": "KX4927", "score": 0.9, "name": "Alice",
                                "known_plate": "KX4921"}  # fmt: skip
    assert Label("cab", 0.5).caption == "cab"
