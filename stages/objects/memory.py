"""What a node remembers of each object: when to try it again, its attempts' votes, and the
result that holds. A still crowd costs nothing once each of its objects has a result.

The rule, per object (a source's track, or the box another node found inside one):

- a **round** of attempts starts when the object is new, when its box's area has grown to
  ``grow`` times the largest it had at any attempt, and ``reinfer_s`` after the last round
  started;
- within a round, an attempt is made at most every ``retry_s`` of stream time, and at most
  ``attempts`` of them;
- each attempt gives a label and a score; it **votes** for its label when the score is at
  least ``threshold``;
- the round's result **holds** once at least ``min_attempts`` were made and one label has
  the votes of at least ``agree`` of them; its score is the mean of those votes. Then the
  round ends (no more calls for this object until a new round starts);
- a round that runs out of attempts without a result ends too; the previous result stays.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rules:
    attempts: int = 3
    retry_s: float = 0.2
    reinfer_s: float | None = None
    grow: float | None = 1.5
    threshold: float = 0.5
    min_attempts: int = 2
    agree: float = 0.6
    forget_s: float = 10.0
    """An object unseen for this long (stream seconds) is forgotten."""


@dataclass(frozen=True)
class Vote:
    """One attempt's outcome."""

    label: str | None
    """What it says the object is (None: nothing found)."""
    score: float
    payload: Any = None
    """What the kind keeps of it (boxes relative to the object, a vector)."""


@dataclass(frozen=True)
class Result:
    label: str
    score: float
    payload: Any
    attempts: int
    """Of its round."""


@dataclass
class ObjectState:
    round_start: float
    seen: float
    tries: int = 0
    last_try: float | None = None
    best_area: float = 0.0
    """The largest box an attempt was made on: only a view larger than every one before
    starts a round (a box that shrinks behind an obstacle and comes back does not)."""
    ended: bool = False
    renew: bool = False
    """Start a new round when next seen (what the results were judged by changed)."""
    votes: list[Vote] = field(default_factory=list)
    result: Result | None = None
    calls: int = 0
    """Every attempt on this object, all rounds."""


class ObjectMemory:
    """Per node: object key -> its state."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.objects: dict[Any, ObjectState] = {}
        self.most_calls = 0
        """The most attempts any one object had (``--stats``: checked against the rules)."""
        self._swept: dict[str, float] = {}

    def due(self, key: Any, pts: float, area: float) -> bool:
        """Whether the object ``key`` (a tuple starting with its source id) is to be tried on
        this frame; marks it seen."""
        rules = self.rules
        state = self.objects.get(key)
        if state is None:
            self.objects[key] = ObjectState(round_start=pts, seen=pts)
            return True
        state.seen = pts
        grown = (
            rules.grow is not None and state.best_area > 0 and area >= rules.grow * state.best_area
        )
        again = rules.reinfer_s is not None and pts - state.round_start >= rules.reinfer_s - 1e-9
        if grown or state.renew or (state.ended and again):
            state.renew = False
            state.round_start, state.tries, state.ended, state.votes = pts, 0, False, []
            state.best_area = max(state.best_area, area)
            state.last_try = None
            return True
        if state.ended or state.tries >= rules.attempts:
            return False
        if state.last_try is None:
            return True
        elapsed = pts - state.last_try  # negative: the stream started again (a loop)
        return elapsed < 0 or elapsed >= rules.retry_s - 1e-9

    def reserve(self, key: Any, pts: float, area: float) -> None:
        """An attempt on ``key`` is made on this frame (its vote comes with ``record``, once
        the batch's model call is done): counted now, so that the object's later frames in
        the same batch are not tried again."""
        state = self.objects.get(key)
        if state is None:
            state = self.objects[key] = ObjectState(round_start=pts, seen=pts)
        state.tries += 1
        state.calls += 1
        self.most_calls = max(self.most_calls, state.calls)
        state.last_try, state.best_area = pts, max(state.best_area, area)

    def record(self, key: Any, vote: Vote) -> Result | None:
        """A reserved attempt's outcome; returns the result when it made one hold."""
        state = self.objects.get(key)
        if state is None:  # forgotten meanwhile
            return None
        state.votes.append(vote)
        held = self._holds(state.votes)
        if held is not None:
            state.result, state.ended = held, True
        elif len(state.votes) >= self.rules.attempts:
            state.ended = True
        return held

    def _holds(self, votes: list[Vote]) -> Result | None:
        rules = self.rules
        if len(votes) < rules.min_attempts:
            return None
        counted = [v for v in votes if v.label is not None and v.score >= rules.threshold]
        tally = Counter(v.label for v in counted)
        if not tally:
            return None
        label, count = tally.most_common(1)[0]
        if count < rules.agree * len(votes) - 1e-9:
            return None
        mine = [v for v in counted if v.label == label]
        best = max(mine, key=lambda v: v.score)
        score = sum(v.score for v in mine) / len(mine)
        assert label is not None
        return Result(label, score, best.payload, len(votes))

    def shadow(self) -> ObjectMemory:
        """A copy to plan a batch on (which crops to cut) without touching this memory."""
        copy = type(self)(self.rules)
        copy.objects = {
            key: dataclasses.replace(state, votes=list(state.votes))
            for key, state in self.objects.items()
        }
        copy._swept = dict(self._swept)
        return copy

    def renew(self) -> None:
        """Every object starts a new round when next seen; results stay until then."""
        for state in self.objects.values():
            state.renew = True

    def result(self, key: Any) -> Result | None:
        state = self.objects.get(key)
        return state.result if state is not None else None

    def sweep(self, source_id: str, pts: float) -> None:
        """Forgets the source's objects unseen for ``forget_s`` (looked at once a second)."""
        last = self._swept.get(source_id)
        if last is not None and 0 <= pts - last < 1.0:
            return
        self._swept[source_id] = pts
        forget = self.rules.forget_s
        for key in [
            k for k, s in self.objects.items() if k[0] == source_id and pts - s.seen > forget
        ]:
            del self.objects[key]

    def forget_source(self, source_id: str) -> None:
        for key in [k for k in self.objects if k[0] == source_id]:
            del self.objects[key]
        self._swept.pop(source_id, None)
