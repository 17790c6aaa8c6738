"""A frame's timestamp in seconds is ``float(pts * time_base)`` bit for bit, made without
Fractions (stages/source/stage.py ``seconds``)."""

from __future__ import annotations

import random
from fractions import Fraction

from vapipe.stages.source.stage import seconds


def test_seconds_equal_the_fraction_arithmetic_bit_for_bit() -> None:
    rng = random.Random(61)
    bases = [Fraction(1, 90000), Fraction(1001, 30000), Fraction(1, 25), Fraction(1, 1000),
             Fraction(1, 15360), Fraction(1, 12800), Fraction(7, 3)]  # fmt: skip
    for base in bases:
        values = [0, 1, -1, 3003, 2**31 - 1, 2**40 + 17, -(2**33)]
        values += [rng.randrange(-(2**45), 2**45) for _ in range(20000)]
        for pts in values:
            assert seconds(pts, base) == float(pts * base), (pts, base)
    assert seconds(None, Fraction(1, 25)) is None and seconds(5, None) is None
