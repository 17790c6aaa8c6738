"""Plate text: normalising, the plate shape, the distance, and the per-character vote."""

from __future__ import annotations

import pytest

from vapipe.stages.plates.text import PlateShape, Read, distance, normalised, vote


def read(text: str, *scores: float) -> Read:
    return Read(text, scores or (0.9,) * len(text))


def test_separators_and_case_are_dropped() -> None:
    assert normalised("kx-4921") == "KX4921"
    assert normalised(" 7hj k.582 ") == "7HJK582"
    assert normalised("AB_12:CD") == "AB12CD"
    assert normalised("ÄB12") == "ÄB12"  # not a separator: kept, for the shape to judge


@pytest.mark.parametrize(
    ("text", "fits"),
    [("AB12", True), ("AB1", False), ("ABCDEFGHIJ", True), ("ABCDEFGHIJK", False),
     ("AB-12", False), ("ab12", False), ("ÄB12", False)],
)  # fmt: skip
def test_the_plate_shape(text: str, fits: bool) -> None:
    assert PlateShape(4, 10, "A-Z0-9").fits(text) is fits


def test_the_default_shape_is_4_to_10_characters() -> None:
    shape = PlateShape()
    assert [shape.fits("A" * n) for n in (3, 4, 10, 11)] == [False, True, True, False]


def test_a_shape_of_other_characters() -> None:
    shape = PlateShape(3, 5, "0-9")
    assert shape.fits("123") and not shape.fits("12A")


@pytest.mark.parametrize(
    ("a", "b", "apart"),
    [("KX4921", "KX4921", 0), ("KX4921", "KX4927", 1), ("KX4921", "KX492", 1),
     ("KX4921", "XKX4921", 1), ("KX4921", "KY4927", 2), ("", "ABC", 3), ("ABC", "", 3),
     ("KITTEN", "SITTING", 3), ("ABCD", "XABC", 2), ("AB", "BA", 2), ("ABC", "AXBXC", 2),
     ("XABC", "ABCD", 2), ("A", "", 1)],
)  # fmt: skip
def test_distance(a: str, b: str, apart: int) -> None:
    assert distance(a, b) == apart == distance(b, a)


def test_one_misread_character_is_outvoted_position_by_position() -> None:
    voted = vote([read("KX4921"), read("KX4927"), read("KY4921")])
    assert voted is not None
    assert voted.text == "KX4921"  # no two reads agree whole, every position does
    assert voted.agreeing == 3


def test_the_length_most_reads_have_wins_and_only_they_vote() -> None:
    voted = vote([read("KX4921"), read("KX49210", *[1.0] * 7), read("KX4921")])
    assert voted is not None
    assert voted.text == "KX4921" and voted.agreeing == 2


def test_a_position_goes_to_the_higher_summed_score() -> None:
    voted = vote([read("AB", 0.9, 0.6), read("AC", 0.9, 0.95)])
    assert voted is not None and voted.text == "AC"
    voted = vote([read("AB", 0.9, 0.6), read("AB", 0.9, 0.6), read("AC", 0.9, 0.95)])
    assert voted is not None and voted.text == "AB"  # 1.2 against 0.95


def test_a_tie_at_a_position_goes_the_same_way_whatever_the_order() -> None:
    first = vote([read("AB", 0.9, 0.7), read("AC", 0.9, 0.7)])
    second = vote([read("AC", 0.9, 0.7), read("AB", 0.9, 0.7)])
    assert first is not None and second is not None
    assert first.text == second.text == "AC"  # the later letter: never the order of reads


def test_equal_lengths_tie_on_the_summed_score() -> None:
    voted = vote([read("ABCD", *[0.5] * 4), read("ABCDE", *[0.9] * 5)])
    assert voted is not None and voted.text == "ABCDE"


def test_the_score_is_the_voters_mean() -> None:
    voted = vote([read("AB", 1.0, 0.5), read("AB", 0.5, 0.5), read("ABC", 1.0, 1.0, 1.0)])
    assert voted is not None
    assert voted.score == pytest.approx((0.75 + 0.5) / 2)
    assert vote([]) is None
    assert Read("", ()).score == 0.0
