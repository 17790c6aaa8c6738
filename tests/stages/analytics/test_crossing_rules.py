"""Crossing rules that scale with the object (depth and jitter band as fractions of its size
across the line, or of its height for a zone) and crossings placed where the path crosses the
segment."""

from __future__ import annotations

import pytest

from tests.stages.analytics.test_counting import LINE, ZONE, Path, crossings, run, walk, zone_events


def test_the_crossing_depth_and_the_jitter_band_scale_with_the_box() -> None:
    # An object's size is its box's height. The same path, 12 px past the line: 0.6 of a box
    # 20 px tall (a far walker), 0.15 of one 80 px tall (the same walker near): not yet over.
    rule = {"lines": [LINE], "min_crossing_depth": 0.2, "min_crossing_px": 4}
    path = walk(90, 112, 12)
    assert crossings(run(rule, {1: path}, height=20)[0]) == [(1, "out")]
    assert crossings(run(rule, {1: path}, height=80)[0]) == []
    farther = walk(90, 117, 12)  # 17 px: 0.21 of 80
    assert crossings(run(rule, {1: farther}, height=80)[0]) == [(1, "out")]
    # the floor in pixels holds for a tiny box: 0.2 x 8 = 1.6 px < min_crossing_px
    tiny = run({**rule, "min_crossing_px": 6}, {1: walk(90, 105, 8)}, height=8)
    assert crossings(tiny[0]) == []
    # the band: 6 px is inside 0.1 of an 80 px box (8 px), outside 0.1 of a 20 px one (2 px)
    band = {"lines": [LINE], "hysteresis_px": 0, "hysteresis_depth": 0.1,
            "min_crossing_px": 0, "min_crossing_depth": 0}  # fmt: skip
    jitter: Path = [(90, 100), (106, 100), (90, 100), (106, 100)]
    assert crossings(run(band, {1: jitter}, height=80)[0]) == []
    assert crossings(run(band, {1: jitter}, height=20)[0]) == [(1, "out"), (1, "in"), (1, "out")]


def test_the_size_is_the_box_s_height_whatever_the_line_s_direction() -> None:
    # A walker's box is a third as wide as it is tall: swinging 6% of its height either side
    # of a vertical line is 18% of its width, and counted at every swing if the width were the
    # yardstick; in the height, it is well under the 0.25 of the default.
    level = {"name": "gate", "start": [0, 100], "end": [400, 100]}
    down = [(200.0, 90 + 3 * i) for i in range(6)]  # ends 5 px below the line
    rule = {"lines": [level], "min_crossing_depth": 0.2, "min_crossing_px": 4}
    flat = run(rule, {1: down}, width=80, height=20)  # needs 4 px
    assert crossings(flat[0]) == [(1, "in")]
    tall = run(rule, {1: down}, width=20, height=80)  # needs 16 px
    assert crossings(tall[0]) == []
    swing = 0.06 * 240  # a walker 240 px tall (720p), 94 px wide, on the vertical line
    along: Path = [(100 + (swing if (i // 4) % 2 else -swing), 20 + 2 * i) for i in range(80)]
    walker = run({"lines": [LINE], "min_crossing_px": 12}, {1: along}, width=94, height=240)
    assert crossings(walker[0]) == []
    crossing = run({"lines": [LINE]}, {1: walk(40, 180, 14)}, width=94, height=240)
    assert crossings(crossing[0]) == [(1, "out")]


@pytest.mark.parametrize(
    ("path", "counted"),
    [
        # crosses x = 100 at y = 192 (inside the 0-200 segment); its first point past the
        # line lies beyond the end (y = 204)
        ([(94, 180), (106, 204)], [(1, "out")]),
        # crosses at y = 204 (beyond the end); its first point past lies inside (y = 196)
        ([(94, 212), (106, 196)], []),
        # a hidden stretch: the path from the last point seen to the next crosses inside
        ([(94, 150), None, None, (106, 210)], [(1, "out")]),
        # the other way round
        ([(106, 180), (94, 204)], [(1, "in")]),
        ([(106, 212), (94, 196)], []),
        # unevenly: 4 px before, 12 px past: a quarter of the way, at y = 202, beyond the end
        ([(96, 190), (112, 238)], []),
        ([(104, 190), (88, 238)], []),
    ],
)
def test_a_crossing_is_placed_where_the_path_crosses_the_line(path: Path, counted: list) -> None:
    events, _ = run({"lines": [LINE], "min_crossing_px": 4}, {1: path})
    assert crossings(events) == counted


def test_a_zone_s_jitter_band_scales_with_the_box_height() -> None:
    # The bay's left edge is x = 200; an anchor 6 px inside it is clear of a 10% band for a
    # box 20 px tall (2 px), not for one 80 px tall (8 px): that one has not entered yet.
    band = {"zones": [ZONE], "hysteresis_px": 0, "hysteresis_depth": 0.1}
    path: Path = [(190, 100), (206, 100), (206, 100)]
    entered = [e[:3] for e in zone_events(run(band, {1: path}, height=20)[0])]
    assert entered == [(1, "zone_enter", 1)]
    assert zone_events(run(band, {1: path}, height=80)[0]) == []
    wide = run(band, {1: path}, width=80, height=20)[0]  # the height, not the width, counts
    assert [e[:3] for e in zone_events(wide)] == [(1, "zone_enter", 1)]


def test_the_depth_that_counts_is_the_deepest_reached_not_the_last() -> None:
    # Over the line (x = 100) 20 px deep, then back to 8 px past it while the frames needed
    # come in: it did go deep enough (12 px), so it counts on the third frame past the line.
    rule = {"lines": [LINE], "min_crossing_frames": 3, "min_crossing_px": 12,
            "min_crossing_depth": 0, "hysteresis_px": 4}  # fmt: skip
    deep_then_back: Path = [(90, 100), (120, 100), (108, 100), (108, 100)]
    assert crossings(run(rule, {1: deep_then_back})[0]) == [(1, "out")]
    never_deep: Path = [(90, 100), (108, 100), (110, 100), (108, 100)]
    assert crossings(run(rule, {1: never_deep})[0]) == []
