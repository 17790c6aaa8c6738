"""A plate holds per track by a vote per character; a plate-only camera's reads make
sightings."""

from __future__ import annotations

import numpy as np

from vapipe.stages.objects.memory import Rules, Vote
from vapipe.stages.plates.memory import PlateMemory
from vapipe.stages.plates.reader import Found
from vapipe.stages.plates.sightings import Sightings
from vapipe.stages.plates.text import Read


class Payload:
    def __init__(self, text: str, score: float) -> None:
        self.read = Read(text, (score,) * len(text))


def plate_vote(text: str, score: float = 0.95) -> Vote:
    return Vote(text, score, Payload(text, score))


def memory(**rules: float) -> PlateMemory:
    return PlateMemory(
        Rules(**{"attempts": 6, "min_attempts": 2, "agree": 0.5, "threshold": 0.8, **rules})
    )


def attempt(mem: PlateMemory, key: tuple[str, int], vote: Vote, pts: float):
    assert mem.due(key, pts, 100.0)
    mem.reserve(key, pts, 100.0)
    return mem.record(key, vote)


def test_two_reads_that_differ_in_a_character_still_hold_by_the_vote() -> None:
    mem = memory(min_attempts=3)
    key = ("cam", 1)
    assert attempt(mem, key, plate_vote("KX4921", 0.9), 0.0) is None
    assert attempt(mem, key, plate_vote("KX4927", 0.85), 0.2) is None  # 2 < min_attempts
    held = attempt(mem, key, plate_vote("KX4921", 0.95), 0.4)
    assert held is not None and held.label == "KX4921"
    assert held.score == np.float64((0.9 + 0.85 + 0.95) / 3).item()
    assert held.payload.read.text == "KX4921"  # the best read of the voted text
    assert mem.result(key) is held
    assert not mem.due(key, 0.6, 100.0)  # the round is over


def test_reads_below_the_threshold_and_failures_do_not_vote_but_count() -> None:
    mem = memory()
    key = ("cam", 2)
    assert attempt(mem, key, plate_vote("KX4921", 0.5), 0.0) is None
    assert attempt(mem, key, Vote(None, 0.0), 0.2) is None
    assert attempt(mem, key, Vote(None, 0.0), 0.4) is None  # 0 of 3 voted
    held = attempt(mem, key, plate_vote("KX4921"), 0.6)
    assert held is None  # 1 of 4: under agree 0.5
    assert attempt(mem, key, plate_vote("KX4921"), 0.8) is None  # 2 of 5
    held = attempt(mem, key, plate_vote("KX4921"), 1.0)
    assert held is not None and held.attempts == 6  # 3 of 6 read a plate of its length


def test_the_shadow_plans_with_the_same_kind_of_memory() -> None:
    assert type(memory().shadow()) is PlateMemory


def found(text: str, score: float = 0.9) -> Found:
    return Found(Read(text, (score,) * len(text)), np.zeros((4, 2), np.float32), text)


def test_reads_of_one_plate_make_one_sighting_and_it_holds() -> None:
    sightings = Sightings(min_reads=2, agree=0.5, gone_s=2.0)
    first = sightings.add(found("KX4921"), 0.0)
    assert not sightings.holds(first) and first.number == 0
    stray = sightings.add(found("ZZZ999"), 0.1)  # never read again: never numbered
    again = sightings.add(found("KX4927"), 0.2)  # one misread: the same plate
    assert again is first and sightings.holds(first) and first.number == 1
    other = sightings.add(found("7HJK582"), 0.4)
    assert other is not first and not sightings.holds(other)
    sightings.add(found("7HJK582"), 0.5)
    assert sightings.holds(other) and other.number == 2 and stray.number == 0
    assert sightings.holds(first) and first.number == 1, "numbered once"
    assert [s.number for s in sightings.open] == [1, 0, 2]


def test_a_plate_not_read_for_gone_s_leaves_and_comes_back_as_a_new_sighting() -> None:
    sightings = Sightings(min_reads=1, agree=0.5, gone_s=2.0)
    first = sightings.add(found("KX4921"), 0.0)
    assert sightings.holds(first)
    still = sightings.add(found("KX4921"), 1.9)
    assert still is first
    later = sightings.add(found("KX4921"), 4.0)
    assert later is not first and sightings.holds(later) and later.number == 2
    assert sightings.open == [later]
    looped = sightings.add(found("KX4921"), 0.5)  # the stream went back
    assert looped is not later and sightings.holds(looped) and looped.number == 3


def test_three_characters_apart_is_another_plate() -> None:
    sightings = Sightings(min_reads=1, agree=0.5, gone_s=2.0)
    first = sightings.add(found("KX4921"), 0.0)
    assert sightings.add(found("KX4999", 0.5), 0.1) is first  # two apart: NEAR
    assert first.voted is not None and first.voted.text == "KX4921"
    assert sightings.add(found("KA3931"), 0.2) is not first  # three from the voted KX4921


def test_a_read_joins_the_nearest_sighting() -> None:
    sightings = Sightings(min_reads=1, agree=0.5, gone_s=2.0)
    one = sightings.add(found("KX4921"), 0.0)
    two = sightings.add(found("KX4X2X"), 0.0)  # 2 from the first: joins it
    assert two is one
    three = sightings.add(found("AB1234"), 0.1)
    assert three is not one
    assert sightings.add(found("AB1294"), 0.2) is three  # 1 from AB1234, 4 from KX4921


def test_a_sighting_holds_when_enough_reads_agree_on_the_length() -> None:
    sightings = Sightings(min_reads=2, agree=0.6, gone_s=2.0)
    seen = sightings.add(found("KX4921"), 0.0)
    assert sightings.add(found("KX49"), 0.1) is seen  # 2 apart
    assert not sightings.holds(seen)  # 1 of 2 of one length: under 0.6
    sightings.add(found("KX4921"), 0.2)
    assert sightings.holds(seen) and seen.number == 1  # 2 of 3: more reads than min_reads
    exact = Sightings(min_reads=2, agree=0.5, gone_s=2.0)
    half = exact.add(found("KX4921"), 0.0)
    exact.add(found("KX49"), 0.1)
    assert exact.holds(half), "1 of 2 is agree = 0.5 exactly"


def test_gone_s_is_counted_from_the_last_read() -> None:
    sightings = Sightings(min_reads=1, agree=0.5, gone_s=2.0)
    first = sightings.add(found("KX4921"), 1.9)
    assert sightings.add(found("KX4921"), 1.9) is first  # the same instant
    assert sightings.add(found("KX4921"), 2.5) is first  # 0.6 after the last read
    assert sightings.add(found("KX4921"), 4.5) is not first  # exactly gone_s after


def test_the_picture_kept_is_the_best_read_of_the_voted_plate_else_the_best() -> None:
    mem = memory(min_attempts=3)
    key = ("cam", 4)
    attempt(mem, key, plate_vote("KX4921", 0.85), 0.0)
    attempt(mem, key, plate_vote("KX4927", 0.99), 0.2)
    held = attempt(mem, key, plate_vote("KX4921", 0.9), 0.4)
    assert held is not None and held.label == "KX4921"
    assert held.payload.read.score == 0.9, "the best read that says the voted plate"
    other = memory(min_attempts=3)
    attempt(other, key, plate_vote("KY4921", 0.9), 0.0)
    attempt(other, key, plate_vote("KX4927", 0.95), 0.2)
    held = attempt(other, key, plate_vote("KX4821", 0.9), 0.4)
    assert held is not None and held.label == "KX4921"  # no read said it whole
    assert held.payload.read.text == "KX4927", "then the best read of all"


def test_a_read_at_the_threshold_votes() -> None:
    mem = memory(min_attempts=1, threshold=0.8)
    assert attempt(mem, ("cam", 5), plate_vote("KX4921", 0.8), 0.0) is not None
    mem = memory(min_attempts=1, threshold=0.8)
    assert attempt(mem, ("cam", 5), plate_vote("KX4921", 0.79), 0.0) is None
