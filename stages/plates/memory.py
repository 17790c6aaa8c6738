"""The object memory of a ``plates`` node: rounds and attempts as every object node's
(``stages/objects/memory.py``), but a plate holds by a vote per character across the
track's reads (``text.vote``), not by whole reads agreeing: one misread character in one view
does not split the vote."""

from __future__ import annotations

from vapipe.stages.objects.memory import ObjectMemory, Result, Vote
from vapipe.stages.plates.text import Read, vote


class PlateMemory(ObjectMemory):
    def _holds(self, votes: list[Vote]) -> Result | None:
        rules = self.rules
        if len(votes) < rules.min_attempts:
            return None
        counted = [v for v in votes if v.label is not None and v.score >= rules.threshold]
        reads: list[Read] = [v.payload.read for v in counted]
        voted = vote(reads)
        if voted is None or voted.agreeing < rules.agree * len(votes) - 1e-9:
            return None
        # The picture and place kept: the best read that says the voted text, else the best.
        same = [v for v in counted if v.label == voted.text]
        best = max(same or counted, key=lambda v: v.score)
        return Result(voted.text, voted.score, best.payload, len(votes))
