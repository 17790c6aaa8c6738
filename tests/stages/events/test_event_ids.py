"""Analytics events carry an id made of what they are, so a consumer can drop one it has had
(a shard restarted in a cluster makes the same events again)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tests.events_schema import assert_valid_events
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.events.records import frame_records


def records(seq: int, events: list[dict]) -> list[dict]:
    info = StreamInfo("cam", "cam.mp4", 64, 48, Fraction(25))
    frame = Frame("cam", seq, seq / 25, 1000.0, np.zeros((48, 64, 3), np.uint8), info)
    frame.events = events
    return list(frame_records(frame))


CROSS = {"event": "line_cross", "track_id": 3, "class_name": "person", "line": "door",
         "direction": "in", "counts": {"in": 1, "out": 0}}  # fmt: skip
CROWDED = {"event": "zone_crowded", "track_id": None, "class_name": None, "zone": "queue",
           "occupancy": 5, "max_objects": 4, "track_ids": [1, 2, 3, 4, 5]}  # fmt: skip


def test_ids_name_the_source_frame_type_track_and_place() -> None:
    made = records(7, [CROSS, CROWDED])
    assert [r.get("id") for r in made] == [
        None,  # the frame event itself: its (source_id, seq) is its id already
        "cam/7/line_cross/3/door",
        "cam/7/zone_crowded/-/queue",
    ]
    assert_valid_events(made)


def test_the_same_event_made_again_has_the_same_id_and_others_differ() -> None:
    again = records(7, [dict(CROSS)])[1]["id"]
    assert again == records(7, [CROSS])[1]["id"]
    assert records(8, [CROSS])[1]["id"] != again
    assert records(7, [{**CROSS, "track_id": 4}])[1]["id"] != again
    assert records(7, [{**CROSS, "line": "gate"}])[1]["id"] != again
