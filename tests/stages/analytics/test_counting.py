"""Lines and zones on synthetic tracks with known trajectories: exact crossings, entries,
exits, dwell and crowding, including jitter, misses, objects crossing each other and tracks
lost and found."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.events_schema import assert_valid_events
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.stage import AnalyticsStage
from vapipe.stages.events.records import frame_records

NAMES = ("person", "bicycle", "car")
FPS = 10.0
# A vertical line from top to bottom at x = 100: moving left (x decreasing) is "in".
LINE = {"name": "gate", "start": [100, 0], "end": [100, 200]}
ZONE = {"name": "bay", "polygon": [[200, 0], [300, 0], [300, 200], [200, 200]]}

Path = list[tuple[float, float] | None]  # anchor (bottom centre) per frame; None: not seen


def run(
    config: dict[str, Any],
    tracks: dict[int, Path],
    classes: dict[int, int] | None = None,
    width: float = 10,
    height: float = 20,
    predicted: frozenset[int] = frozenset(),
):
    """Feed the tracks through an analytics stage, each box ``width`` wide and ``height``
    tall above its anchor (the frames in ``predicted`` flagged so: the tracker's guesses);
    return (events, last summary)."""
    stage = AnalyticsStage("analytics", AnalyticsConfig.model_validate(config))
    stage.open(None)  # type: ignore[arg-type]
    length = max(len(path) for path in tracks.values())
    events: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    info = StreamInfo("cam", "x", 400, 200, None)
    for seq in range(length):
        rows = [
            (track_id, path[seq])
            for track_id, path in tracks.items()
            if seq < len(path) and path[seq] is not None
        ]
        half = width / 2
        xyxy = np.array([[x - half, y - height, x + half, y] for _, (x, y) in rows], np.float32)
        dets = Detections(
            xyxy.reshape(len(rows), 4),
            np.full(len(rows), 0.9, np.float32),
            np.array([(classes or {}).get(t, 0) for t, _ in rows], np.int32),
            NAMES,
            np.array([t for t, _ in rows], np.int64),
        )
        frame = Frame("cam", seq, seq / FPS, 0.0, np.zeros((200, 400, 3), np.uint8), info)
        frame.detections = dets
        frame.predicted = seq in predicted
        (out,) = stage.process(frame)
        assert_valid_events(list(frame_records(out)))
        events.extend({**event, "seq": seq} for event in out.events)
        summary = out.analytics.summary
    return events, summary


def walk(x0: float, x1: float, frames: int, y: float = 100) -> Path:
    return [(x0 + (x1 - x0) * i / (frames - 1), y) for i in range(frames)]


def crossings(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["track_id"], e["direction"]) for e in events if e["event"] == "line_cross"]


@pytest.mark.parametrize(
    ("tracks", "expected"),
    [
        pytest.param({1: walk(20, 180, 17)}, [(1, "out")], id="rightward-is-out"),
        pytest.param({1: walk(180, 20, 17)}, [(1, "in")], id="leftward-is-in"),
        pytest.param(
            {
                1: [
                    *walk(20, 100, 9),
                    (98, 100),
                    (102, 100),
                    (99, 100),
                    (101, 100),
                    *walk(100, 180, 9),
                ]
            },
            [(1, "out")],
            id="jitter-on-the-line-counts-once",
        ),
        pytest.param(
            {1: [*walk(20, 90, 8), None, None, None, *walk(110, 180, 8)]},
            [(1, "out")],
            id="missed-while-crossing",
        ),
        pytest.param(
            {1: walk(20, 180, 17), 2: walk(180, 20, 17)},
            [(1, "out"), (2, "in")],
            id="two-objects-crossing-each-other",
        ),
        pytest.param({1: walk(20, 180, 17, y=250)}, [], id="passing-beyond-the-end"),
        pytest.param({1: walk(20, 95, 10) + walk(95, 20, 10)}, [], id="turning-back-before"),
        pytest.param(
            {1: walk(20, 180, 17) + walk(180, 20, 17)},
            [(1, "out"), (1, "in")],
            id="there-and-back",
        ),
    ],
)
def test_line_crossings(tracks: dict[int, Path], expected: list[tuple[int, str]]) -> None:
    events, summary = run({"lines": [LINE]}, tracks)
    assert crossings(events) == expected
    outs = sum(1 for _, d in expected if d == "out")
    ins = len(expected) - outs
    assert summary["lines"]["gate"]["out"] == outs and summary["lines"]["gate"]["in"] == ins


def test_walking_along_the_line_counts_nothing_and_a_real_return_counts() -> None:
    # Someone walks down the line with their anchor wandering 7 px either side of it, a few
    # frames on each side (as track 37 on people.mp4 did); then walks off to the right, and
    # much later comes back.
    wander = [(100 + (7 if (i // 3) % 2 else -7), 10 + 4 * i) for i in range(40)]
    path: Path = [*wander, *walk(107, 180, 8, y=170), *[(180, 170)] * 20, *walk(180, 20, 17)]
    config = {"lines": [LINE], "min_crossing_px": 10, "min_crossing_frames": 2}
    events, _ = run(config, {1: path})
    assert [(e["direction"], e["seq"]) for e in events] == [("out", 41), ("in", 78)]
    # Without the depth rule each wander across counts.
    loose, _ = run({**config, "min_crossing_px": 0}, {1: path})
    assert len(crossings(loose)) > 10


def test_a_one_frame_excursion_past_the_line_is_not_a_crossing() -> None:
    # One bad box puts the anchor 30 px over the line for a single frame.
    path: Path = [*walk(20, 90, 8), (130, 100), *[(90, 100)] * 5]
    rule = {"lines": [LINE], "min_crossing_px": 8}
    events, _ = run({**rule, "min_crossing_frames": 2}, {1: path})
    assert crossings(events) == []
    # Two such frames, apart: each excursion starts over.
    twice: Path = [*walk(20, 90, 8), (130, 100), (90, 100), (90, 100), (130, 100), (90, 100)]
    events, _ = run({**rule, "min_crossing_frames": 2}, {1: twice})
    assert crossings(events) == []
    events, _ = run({**rule, "min_crossing_frames": 1}, {1: path})
    assert crossings(events) == [(1, "out"), (1, "in")]


def test_where_a_crossing_happens_is_where_it_came_over() -> None:
    # Over the line near its lower end (y 190), then on beyond the end (y 250) before the
    # depth rule completes it: still a crossing of this line. Over beyond the end: none.
    inside: Path = [(90, 190), (97, 190), (106, 190), (130, 250), (160, 250)]
    events, _ = run({"lines": [LINE], "min_crossing_px": 20}, {1: inside})
    assert crossings(events) == [(1, "out")]
    beyond: Path = [(90, 250), (97, 230), (106, 210), (130, 190), (160, 190)]
    events, _ = run({"lines": [LINE], "min_crossing_px": 20}, {1: beyond})
    assert crossings(events) == []


def test_renamed_directions_and_class_filter_and_counts_by_class() -> None:
    line = {**LINE, "in_label": "westbound", "out_label": "eastbound", "classes": ["car"]}
    events, summary = run(
        {"lines": [line]},
        {1: walk(20, 180, 17), 2: walk(180, 20, 17), 3: walk(20, 180, 17, y=120)},
        classes={1: 2, 2: 2, 3: 0},  # two cars and a person
    )
    assert crossings(events) == [(1, "eastbound"), (2, "westbound")]
    gate = summary["lines"]["gate"]
    assert gate["eastbound"] == 1 and gate["westbound"] == 1
    assert gate["by_class"] == {"westbound": {"car": 1}, "eastbound": {"car": 1}}
    last = [e for e in events if e["event"] == "line_cross"][-1]
    assert last["counts"] == {"westbound": 1, "eastbound": 1} and last["class_name"] == "car"


def zone_events(events: list[dict[str, Any]]) -> list[tuple]:
    return [
        (e["seq"], e["event"], e["track_id"], e.get("dwell_s"), e.get("reason"))
        for e in events
        if e["event"].startswith("zone_")
    ]


def test_zone_enter_dwell_exit() -> None:
    # x = 150, 170, 190, 210 (frame 3: inside, 10 px past the edge), then at 250 until frame
    # 40, then out: 276, 302 (frame 43: within 4 px of the edge), 328 (frame 44: clearly out).
    path = walk(150, 250, 6) + [(250, 100)] * 35 + walk(250, 380, 6)
    events, _ = run({"zones": [{**ZONE, "dwell_s": 2.0}]}, {7: path})
    assert zone_events(events) == [
        (3, "zone_enter", 7, None, None),
        (23, "zone_dwell", 7, 2.0, None),
        (44, "zone_exit", 7, 4.1, "left"),
    ]


def test_jitter_on_a_zone_edge_enters_once() -> None:
    edge = [(198, 100), (202, 100), (199, 100), (201, 100)] * 3
    events, _ = run({"zones": [ZONE]}, {1: walk(100, 190, 5) + edge + walk(210, 250, 5)})
    assert [e[1] for e in zone_events(events)] == ["zone_enter"]


def test_a_track_lost_and_found_stays_a_lost_one_leaves() -> None:
    inside = [(250, 100)] * 5
    found = inside + [None] * 5 + inside  # 0.5 s gap < lost_s 1.0
    lost = inside + [None] * 15 + [(250, 100)]  # 1.5 s gap > lost_s: gone, then a new visit
    events, summary = run({"zones": [ZONE], "lost_s": 1.0}, {1: found, 2: lost})
    kinds = [(e[1], e[2], e[4]) for e in zone_events(events)]
    assert kinds == [
        ("zone_enter", 1, None),
        ("zone_enter", 2, None),
        ("zone_exit", 2, "lost"),
        ("zone_enter", 2, None),
    ], kinds
    assert summary["zones"]["bay"] == {"occupancy": 2, "track_ids": [1, 2]}


def test_crowded_and_clear_around_max_objects() -> None:
    tracks = {
        1: [(250, 100)] * 30,
        2: [None] * 5 + [(260, 100)] * 25,
        3: [None] * 10 + [(270, 100)] * 10 + walk(270, 390, 5),
    }
    events, _ = run({"zones": [{**ZONE, "max_objects": 2}]}, tracks)
    crowd = [(e["seq"], e["event"], e["occupancy"], e["track_ids"]) for e in events
             if e["event"] in ("zone_crowded", "zone_clear")]  # fmt: skip
    assert crowd == [(10, "zone_crowded", 3, [1, 2, 3]), (22, "zone_clear", 2, [1, 2])], crowd


def test_normalized_coordinates_scale_to_the_frame() -> None:
    line = {"name": "gate", "start": [0.25, 0.0], "end": [0.25, 1.0]}  # x = 100 of 400
    events, _ = run({"lines": [line], "normalized": True}, {1: walk(20, 180, 17)})
    assert crossings(events) == [(1, "out")]


def test_every_event_names_its_track_class_and_geometry() -> None:
    events, _ = run(
        {"lines": [LINE], "zones": [{**ZONE, "dwell_s": 0.5, "max_objects": 0}]},
        {1: walk(20, 280, 27) + [(280, 100)] * 10 + walk(280, 390, 5)},
    )
    kinds = {e["event"] for e in events}
    assert kinds == {"line_cross", "zone_enter", "zone_dwell", "zone_exit", "zone_crowded",
                     "zone_clear"}  # fmt: skip
    for event in events:
        assert {"event", "track_id", "class_name"} <= event.keys()
        assert ("line" in event) != ("zone" in event)


def test_dwell_is_told_again_on_a_second_visit() -> None:
    visit = walk(150, 250, 6) + [(250, 100)] * 25  # in at frame 3, 2.2 s inside
    away = walk(250, 380, 6) + [(380, 100)] * 3
    events, _ = run({"zones": [{**ZONE, "dwell_s": 2.0}]}, {7: visit + away + visit})
    kinds = [e[1] for e in zone_events(events)]
    assert kinds == ["zone_enter", "zone_dwell", "zone_exit", "zone_enter", "zone_dwell"], kinds


def test_normalized_coordinates_scale_each_axis_by_its_own_size() -> None:
    # The frame is 400 x 200: y = 0.75 is row 150 (row 300 if width and height were mixed up,
    # below the frame: nothing would cross).
    line = {"name": "gate", "start": [0.0, 0.75], "end": [1.0, 0.75]}
    down = [(200, 100 + 10 * i) for i in range(10)]  # bottom centre from row 100 to 190
    events, _ = run({"lines": [line], "normalized": True}, {1: down})
    assert crossings(events) == [(1, "in")]  # downwards: from its left side to its right


def test_a_zone_counts_only_its_classes() -> None:
    path = walk(150, 250, 6) + [(250, 100)] * 3
    events, summary = run(
        {"zones": [{**ZONE, "classes": ["car"]}]}, {1: path, 2: path}, classes={1: 0, 2: 2}
    )
    assert [(e[1], e[2]) for e in zone_events(events)] == [("zone_enter", 2)]
    assert summary["zones"]["bay"]["track_ids"] == [2]


def test_the_default_anchor_is_the_bottom_centre_of_the_box() -> None:
    # A horizontal line at row 105; boxes 20 high. The bottom edge goes 100 -> 118 and
    # crosses it; the centre (90 -> 108) never gets clear of it.
    line = {"name": "kerb", "start": [0, 105], "end": [400, 105]}
    down = [(200, 100 + 3 * i) for i in range(7)]
    events, _ = run({"lines": [line]}, {1: down})
    assert crossings(events) == [(1, "in")]
    centre, _ = run({"lines": [line], "anchor": "center"}, {1: down})
    assert crossings(centre) == []


@pytest.mark.parametrize(("y", "expected"), [(0, [(1, "out")]), (200, [(1, "out")]), (-10, [])])
def test_a_crossing_at_either_end_point_counts_and_one_past_the_start_does_not(
    y: float, expected: list[tuple[int, str]]
) -> None:
    events, _ = run({"lines": [LINE]}, {1: walk(20, 180, 17, y=y)})
    assert crossings(events) == expected


def test_a_sighting_within_the_hysteresis_band_is_on_neither_side() -> None:
    # 2 px past the line, inside the 4 px band: not over it, so nothing completes there
    # even with no depth or frame rule.
    no_depth = {"lines": [LINE], "min_crossing_px": 0, "min_crossing_depth": 0}
    events, _ = run(no_depth, {1: [(90, 100), (102, 100), (90, 100)]})
    assert crossings(events) == []
    events, _ = run(no_depth, {1: [(90, 100), (104, 100)]})
    assert crossings(events) == [(1, "out")]  # at the band's edge: over


@pytest.mark.parametrize(
    ("path", "direction"),
    [([(99.5, 100), (100.5, 100)], "out"), ([(100.5, 100), (99.5, 100)], "in")],
)
def test_the_direction_is_the_side_crossed_to_within_a_pixel(path: Path, direction: str) -> None:
    config = {"lines": [LINE], "min_crossing_px": 0, "min_crossing_depth": 0,
              "hysteresis_px": 0, "hysteresis_depth": 0}  # fmt: skip
    events, _ = run(config, {1: path})
    assert crossings(events) == [(1, direction)]


def test_a_track_unseen_for_exactly_lost_s_is_still_there() -> None:
    # Track 1 in the bay at 0 s, then unseen; track 2 keeps the frames coming. At 1.0 s it
    # has been away exactly lost_s (kept), at 1.1 s longer (gone).
    inside: Path = [(250, 100)]
    other: Path = [(20, 50)] * 13
    events, _ = run({"zones": [ZONE], "lost_s": 1.0}, {1: inside, 2: other})
    exits = [(e["seq"], e["reason"]) for e in events if e["event"] == "zone_exit"]
    assert exits == [(11, "lost")]


def test_dwell_times_are_rounded_to_the_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(globals(), "FPS", 7.0)  # frames 1/7 s apart: times with many decimals
    zone = {**ZONE, "dwell_s": 0.4}
    path: Path = [(250, 100)] * 4 + [(350, 100)]
    events, _ = run({"zones": [zone]}, {1: path})
    dwell = [e["dwell_s"] for e in events if e["event"] == "zone_dwell"]
    exit_ = [e["dwell_s"] for e in events if e["event"] == "zone_exit"]
    assert dwell == [0.429] and exit_ == [0.571]  # 3/7 and 4/7 s


def test_a_filtered_class_before_a_counted_one_does_not_stop_the_count() -> None:
    line = {**LINE, "classes": ["car"]}
    events, _ = run({"lines": [line]}, {1: walk(20, 180, 17), 2: walk(20, 180, 17, y=120)},
                    classes={1: 0, 2: 2})  # fmt: skip
    assert crossings(events) == [(2, "out")]


def test_untracked_detections_never_count() -> None:
    events, _ = run({"lines": [LINE], "zones": [ZONE]}, {-1: walk(20, 280, 27)})
    assert events == []


def test_a_crossing_as_deep_as_min_crossing_px_counts_and_shallower_does_not() -> None:
    events, _ = run({"lines": [LINE]}, {1: [(90, 100), (112, 100)]})  # 12 px past: counts
    assert crossings(events) == [(1, "out")]
    config = {"lines": [LINE], "hysteresis_px": 0, "min_crossing_px": 1}
    events, _ = run(config, {1: [(99.5, 100), (100.5, 100)]})  # half a pixel: not yet
    assert crossings(events) == []


def test_a_zone_is_entered_at_exactly_the_hysteresis_distance_inside() -> None:
    events, _ = run({"zones": [ZONE]}, {1: [(150, 100), (204, 100)]})  # 4 px inside the bay
    assert [e["event"] for e in events] == ["zone_enter"]


def test_lines_count_on_detected_frames_only() -> None:
    """Between detections the boxes are the tracker's guesses: a guess that overshoots the
    line and comes back counts nothing; a crossing guessed and then seen counts once, on the
    frame that saw it."""
    overshoot = [*walk(20, 90, 8), (110, 100), (125, 100), (95, 100), *walk(90, 20, 8)]
    seen = {1: walk(20, 180, 17)}
    guessed = frozenset(range(8, 11))
    events, summary = run({"lines": [LINE]}, {1: overshoot}, predicted=guessed)
    assert crossings(events) == [] and summary["lines"]["gate"]["out"] == 0
    events, _ = run({"lines": [LINE]}, {1: overshoot})  # the same path, all detected
    assert crossings(events) == [(1, "out"), (1, "in")]
    events, summary = run({"lines": [LINE]}, seen, predicted=frozenset(range(8, 12)))
    assert [(e["seq"], e["direction"]) for e in events if e["event"] == "line_cross"] == [
        (12, "out")
    ]
    assert summary["lines"]["gate"]["out"] == 1
    events, _ = run({"lines": [LINE]}, seen)
    assert [e["seq"] for e in events if e["event"] == "line_cross"] == [10]  # 12 px past
