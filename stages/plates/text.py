"""What a read of a plate is made into: its text normalised (upper case, separators dropped),
whether it is plate-shaped, the distance between two plates, and one result voted from a
track's reads, character by character."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

SEPARATORS = re.compile(r"[\s\-.·•_:]+")
"""What plates print between groups and readers drop (``KX-4921`` = ``KX 4921`` =
``KX4921``)."""


def normalised(text: str) -> str:
    """Upper case, separators (spaces, dashes, dots) dropped: the form plates are compared,
    voted, searched and matched in."""
    return SEPARATORS.sub("", text).upper()


@dataclass(frozen=True)
class PlateShape:
    """What a plate's text looks like: a read that is not (a sticker, a dealer's name, a
    fragment) is no vote."""

    min_chars: int = 4
    max_chars: int = 10
    allowed: str = "A-Z0-9"
    """A regular-expression character class (without brackets) of the characters a plate has
    after normalising."""

    def fits(self, text: str) -> bool:
        """Whether normalised ``text`` is plate-shaped."""
        return self.min_chars <= len(text) <= self.max_chars and bool(
            _pattern(self.allowed).fullmatch(text)
        )


@functools.cache
def _pattern(allowed: str) -> re.Pattern[str]:
    return re.compile(f"[{allowed}]+")


def distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest characters inserted, deleted or replaced to turn
    ``a`` into ``b``."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class Read:
    """One attempt's text (normalised) and its characters' scores."""

    text: str
    scores: tuple[float, ...]

    @property
    def score(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else 0.0


@dataclass(frozen=True)
class Voted:
    text: str
    score: float
    """The mean score of the reads that agree with the voted text."""
    agreeing: int
    """Reads of the voted length (the ones that voted on each position)."""


def vote(reads: Sequence[Read]) -> Voted | None:
    """One text from several reads of a plate, Frigate-style: the length most reads have
    (ties: the one with the higher summed score), then at each position the character with
    the highest summed score among those reads. A misread character in one view is outvoted
    by the others, even when no two reads are the same whole."""
    if not reads:
        return None
    by_length: dict[int, list[Read]] = defaultdict(list)
    for read in reads:
        by_length[len(read.text)].append(read)
    length = max(by_length, key=lambda n: (len(by_length[n]), sum(r.score for r in by_length[n])))
    voters = by_length[length]
    text = []
    for position in range(length):
        weights: dict[str, float] = defaultdict(float)
        for read in voters:
            weights[read.text[position]] += read.scores[position]
        text.append(max(weights.items(), key=lambda item: (item[1], item[0]))[0])
    return Voted("".join(text), sum(r.score for r in voters) / len(voters), len(voters))
