"""The per-object rules: when an object is tried, when its result holds, what a round is."""

from __future__ import annotations

from vapipe.stages.objects.memory import ObjectMemory, Rules, Vote

KEY = ("cam", 1)


def attempt(memory: ObjectMemory, pts: float, vote: Vote, area: float = 100.0) -> bool:
    """One frame: whether the object was tried, its vote recorded if it was."""
    if not memory.due(KEY, pts, area):
        return False
    memory.reserve(KEY, pts, area)
    memory.record(KEY, vote)
    return True


def test_a_new_object_is_tried_then_spaced_by_retry_s_and_capped_by_attempts() -> None:
    memory = ObjectMemory(Rules(attempts=3, retry_s=0.2, min_attempts=3, agree=1.0))
    tried = [
        t
        for t in [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]
        if attempt(memory, t, Vote(None, 0.0))
    ]
    assert tried == [0.0, 0.2, 0.4]
    assert memory.objects[KEY].ended and memory.result(KEY) is None
    assert memory.most_calls == 3


def test_a_result_holds_when_enough_attempts_agree_and_then_the_object_costs_nothing() -> None:
    memory = ObjectMemory(Rules(attempts=5, retry_s=0.0, min_attempts=3, agree=0.6))
    votes = [Vote("taxi", 0.9), Vote("car", 0.8), Vote("taxi", 0.7)]
    for pts, vote in enumerate(votes):
        assert attempt(memory, float(pts), vote)
    result = memory.result(KEY)
    assert result is not None and result.label == "taxi" and result.attempts == 3
    assert abs(result.score - 0.8) < 1e-9  # the mean of its votes
    assert not memory.due(KEY, 10.0, 100.0)


def test_no_result_before_min_attempts_nor_without_agreement_nor_under_threshold() -> None:
    memory = ObjectMemory(Rules(attempts=4, retry_s=0.0, min_attempts=2, agree=0.6, threshold=0.5))
    attempt(memory, 0.0, Vote("a", 0.9))
    assert memory.result(KEY) is None  # one attempt of the two needed
    attempt(memory, 1.0, Vote("b", 0.9))
    assert memory.result(KEY) is None  # 1 of 2 for each: under 0.6
    attempt(memory, 2.0, Vote("a", 0.4))
    assert memory.result(KEY) is None  # under the threshold: no vote
    attempt(memory, 3.0, Vote("a", 0.6))
    assert memory.result(KEY) is None  # 2 votes of 4 attempts: 0.5 < 0.6
    assert memory.objects[KEY].ended


def test_a_box_grown_past_its_largest_view_starts_a_round_a_shrunk_one_does_not() -> None:
    memory = ObjectMemory(Rules(attempts=1, retry_s=0.0, min_attempts=1, agree=1.0, grow=1.5))
    assert attempt(memory, 0.0, Vote("a", 0.9), area=100.0)
    assert not attempt(memory, 1.0, Vote("b", 0.9), area=140.0)
    assert not attempt(memory, 2.0, Vote("b", 0.9), area=50.0)
    assert not attempt(memory, 3.0, Vote("b", 0.9), area=100.0)
    assert attempt(memory, 4.0, Vote("b", 0.9), area=150.0)
    result = memory.result(KEY)
    assert result is not None and result.label == "b"
    assert not attempt(memory, 5.0, Vote("c", 0.9), area=200.0)  # 200 < 1.5 x 150


def test_reinfer_s_starts_a_round_the_old_result_stays_until_a_new_one_holds() -> None:
    memory = ObjectMemory(
        Rules(attempts=2, retry_s=0.0, min_attempts=2, agree=1.0, reinfer_s=5.0, grow=None)
    )
    attempt(memory, 0.0, Vote("a", 0.9))
    attempt(memory, 1.0, Vote("a", 0.9))
    assert not attempt(memory, 4.9, Vote("b", 0.9))
    assert attempt(memory, 5.0, Vote("b", 0.9))
    held = memory.result(KEY)
    assert held is not None and held.label == "a"  # one vote of the new round: not yet
    attempt(memory, 6.0, Vote("b", 0.9))
    held = memory.result(KEY)
    assert held is not None and held.label == "b"


def test_renew_tries_every_object_again_and_unseen_objects_are_forgotten() -> None:
    memory = ObjectMemory(Rules(attempts=1, retry_s=0.0, min_attempts=1, agree=1.0, forget_s=10.0))
    attempt(memory, 0.0, Vote("a", 0.9))
    memory.renew()
    assert attempt(memory, 1.0, Vote("b", 0.9))
    other = ("cam", 2)
    memory.due(other, 5.0, 10.0)
    memory.sweep("cam", 11.5)
    assert KEY not in memory.objects and other in memory.objects
    memory.forget_source("cam")
    assert not memory.objects


def test_a_stream_that_starts_again_is_not_stuck_behind_its_old_times() -> None:
    memory = ObjectMemory(Rules(attempts=3, retry_s=0.5, min_attempts=3, agree=1.0))
    attempt(memory, 10.0, Vote(None, 0.0))
    assert attempt(memory, 0.0, Vote(None, 0.0))


def test_sweeping_one_source_keeps_the_others_and_an_object_seen_just_in_time() -> None:
    memory = ObjectMemory(Rules(forget_s=10.0))
    memory.due(("a", 1), 0.0, 10.0)
    memory.due(("b", 1), 0.0, 10.0)
    memory.due(("c", 1), 0.0, 10.0)
    memory.due(("a", 2), 2.0, 10.0)
    memory.sweep("b", 12.0)
    assert set(memory.objects) == {("a", 1), ("a", 2), ("c", 1)}
    memory.sweep("a", 12.0)  # ("a", 2) unseen for exactly forget_s: kept
    assert set(memory.objects) == {("a", 2), ("c", 1)}
    memory.forget_source("c")
    assert set(memory.objects) == {("a", 2)}
