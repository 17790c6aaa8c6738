"""Crossings made while the detector skipped frames (``infer.interval``): an object first seen
past a line, whose motion puts it on the other side when the detector last looked, counts;
the same object under a new id counts once; every-frame detection is not affected."""

from __future__ import annotations

from tests.stages.analytics.test_counting import LINE, Path, crossings, run

EVERY_THIRD = frozenset(seq for seq in range(30) if seq % 3)
"""The detector on frames 0, 3, 6...: the others are the tracker's guesses."""


def born_past_the_line(first: float, second: float) -> Path:
    """Unseen until frame 6 (at ``first``), coasting in place, seen at frame 9 (``second``)."""
    return [None] * 6 + [(first, 100), (first, 100), (first, 100), (second, 100)]


def test_an_object_first_seen_past_the_line_after_skipped_frames_crossed_it_unseen() -> None:
    # 10 px past at frame 6, 30 px on at frame 9: 30 px back at frame 3, 20 px before it.
    events, summary = run(
        {"lines": [LINE]}, {1: born_past_the_line(110, 140)}, predicted=EVERY_THIRD
    )
    assert [(e["seq"], e["direction"]) for e in events if e["event"] == "line_cross"] == [
        (9, "out")
    ]
    assert summary["lines"]["gate"]["out"] == 1
    backwards = [None] * 6 + [(90, 100)] * 3 + [(60, 100)]  # the other way: 90 -> 120 back
    events, _ = run({"lines": [LINE]}, {1: backwards}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "in")]


def test_a_slow_object_first_seen_past_the_line_did_not_cross_it() -> None:
    # 3 px on: back at 127 when the detector last looked, past the line already.
    events, _ = run({"lines": [LINE]}, {1: born_past_the_line(130, 133)}, predicted=EVERY_THIRD)
    assert crossings(events) == []
    # Back to 107: past the line, but inside the 12 px it takes to count; not 4 px (the
    # hysteresis band) from it, so it is a side: the past one.
    events, _ = run({"lines": [LINE]}, {1: born_past_the_line(115, 123)}, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_back_within_the_hysteresis_band_is_no_side() -> None:
    # 118 -> 136: back to 100, on the line: the side it was first seen on stays.
    events, _ = run({"lines": [LINE]}, {1: born_past_the_line(118, 136)}, predicted=EVERY_THIRD)
    assert crossings(events) == []
    # 118 -> 140: back to 96, 4 px before it: the band's edge, a side.
    events, _ = run({"lines": [LINE]}, {1: born_past_the_line(118, 140)}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]


def test_every_frame_detection_counts_only_what_it_saw() -> None:
    """Seen on every frame, an object first seen past the line was not before it (fast: one
    frame back it would be 10 px before the line)."""
    path = [None] * 6 + [(110, 100), (130, 100), (150, 100), (170, 100)]
    events, _ = run({"lines": [LINE]}, {1: path})
    assert crossings(events) == []


def test_a_track_first_seen_on_a_guessed_frame_is_not_run_back() -> None:
    """Only a detected frame starts the run-back: a guess is no sighting."""
    path: Path = [None] * 8 + [(115, 100), (135, 100)]  # frames 8 (guessed) and 9
    events, _ = run({"lines": [LINE]}, {1: path}, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_the_run_back_spans_only_the_time_the_detector_did_not_look() -> None:
    """Born at frame 6, missed at 9, seen at 12: it moved 0.6 s between its sightings but was
    unseen for 0.3 s before its birth, so it is run back half of what it moved."""
    missed = [None] * 6 + [(110, 100)] * 3 + [None] * 3
    events, _ = run({"lines": [LINE]}, {1: [*missed, (150, 100)]}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]  # back 20 px, to 90
    events, _ = run({"lines": [LINE]}, {1: [*missed, (130, 100)]}, predicted=EVERY_THIRD)
    assert crossings(events) == []  # back 10 px, to 100: on the line


def test_born_on_the_line_it_comes_from_where_it_is_run_back_to() -> None:
    # 2 px past, inside the band: no side at its birth; run back to 74, it crossed.
    events, _ = run({"lines": [LINE]}, {1: born_past_the_line(102, 130)}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]


def test_the_band_scales_with_the_object() -> None:
    """Run back to 6 px before the line: a side for a 20 px tall box (band 4 px), the line
    itself for a 200 px one (band 5% of it, 10 px)."""
    path = born_past_the_line(110, 126)
    events, _ = run({"lines": [LINE]}, {1: path}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]
    events, _ = run({"lines": [LINE]}, {1: path}, height=200, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_unseen_crossings_off_counts_only_what_was_seen() -> None:
    config = {"lines": [LINE], "unseen_crossings": False}
    events, _ = run(config, {1: born_past_the_line(110, 140)}, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_a_track_seen_once_makes_no_crossing() -> None:
    events, _ = run({"lines": [LINE]}, {1: [None] * 6 + [(110, 100)] * 4}, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_the_same_object_under_a_new_id_counts_once() -> None:
    """A counted car loses its track at frame 3; a new one finds it at frame 6. Run back over
    the unseen time it lands 8 px before the line (its speed misjudged), over the old track's
    last box: that track's side, already crossed, is the new one's."""
    counted = [(20, 100), (60, 100), (90, 100), (115, 100)]  # 15 px past at frame 3: "out"
    found_again = born_past_the_line(118, 144)  # 26 px on at frame 9: back to 92
    tracks = {1: counted, 2: found_again}
    events, summary = run({"lines": [LINE]}, tracks, width=80, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")] and summary["lines"]["gate"]["out"] == 1
    # The old track had not crossed (it was lost before the line): the new one counts.
    lost_before = [(20, 100), (40, 100), (60, 100), (85, 100)]
    two_lines = {"lines": [LINE, {**LINE, "name": "gate2"}]}  # each line takes its side
    events, _ = run(two_lines, {1: lost_before, 2: found_again}, width=80, predicted=EVERY_THIRD)
    assert [(e["track_id"], e["line"]) for e in events if e["event"] == "line_cross"] == [
        (2, "gate"), (2, "gate2")]  # fmt: skip
    # Far from the old track's last box (no overlap): another object, which crossed.
    far = {1: [(20, 30), (60, 30), (90, 30), (115, 30)], 2: found_again}
    events, _ = run({"lines": [LINE]}, far, width=80, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out"), (2, "out")]


def test_a_tall_box_run_back_into_its_band_is_on_no_side() -> None:
    """Born at frame 6, missed at 9 and 12, seen 60 px past the line at 15 (deep enough for a
    200 px box): run back a third of its 48 px, to 4 px before the line. A side for a 20 px
    box (band 4 px); inside a 200 px box's band (10 px)."""
    path: Path = [None] * 6 + [(112, 100)] * 3 + [None] * 6 + [(160, 100)]
    events, _ = run({"lines": [LINE]}, {1: path}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]
    events, _ = run({"lines": [LINE]}, {1: path}, height=200, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_without_a_band_half_a_pixel_decides_the_side() -> None:
    config = {"lines": [LINE], "hysteresis_px": 0, "hysteresis_depth": 0}
    before = born_past_the_line(110, 120.5)  # back to 99.5: before the line
    events, _ = run(config, {1: before}, predicted=EVERY_THIRD)
    assert crossings(events) == [(1, "out")]
    past = born_past_the_line(110, 119.5)  # back to 100.5: past it already
    events, _ = run(config, {1: past}, predicted=EVERY_THIRD)
    assert crossings(events) == []


def test_no_run_back_over_more_than_lost_s_unseen() -> None:
    """After a long stillness (a motion node) or an outage, an object's run-back would land
    across any line: births that long after the detector last looked are not run back."""
    guessed = frozenset(range(1, 12))  # the detector looks at frame 0, then at 12
    path: Path = [None] * 12 + [(110, 100), (140, 100)]  # born 1.2 s after frame 0
    events, _ = run({"lines": [LINE]}, {1: path}, predicted=guessed)
    assert crossings(events) == []
    # Unseen for exactly lost_s (1.2 s here): run back, counted.
    events, _ = run({"lines": [LINE], "lost_s": 1.2}, {1: path}, predicted=guessed)
    assert crossings(events) == [(1, "out")]
