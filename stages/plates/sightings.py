"""A camera that sees only plates (``on_frame``): no tracker says which reads are one car, so
reads of a source are grouped into sightings by their text (a read within ``near``
characters of a sighting's voted plate is that plate again), each voted as a track's reads
are; a sighting not read for ``gone_s`` has left."""

from __future__ import annotations

from dataclasses import dataclass, field

from vapipe.stages.plates.reader import Found
from vapipe.stages.plates.text import Voted, distance, vote

NEAR = 2
"""A read this many characters or fewer from a sighting's plate is the same plate misread."""


@dataclass
class Sighting:
    last: float
    """Stream time of its latest read."""
    number: int = 0
    """Counted per source from 1 as sightings hold (0: not yet): the event's ``sighting``."""
    reads: list[Found] = field(default_factory=list)
    voted: Voted | None = None
    announced: str | None = None
    """The plate its event gave (None: no event yet)."""


class Sightings:
    """One source's sightings."""

    def __init__(self, min_reads: int, agree: float, gone_s: float) -> None:
        self.min_reads, self.agree, self.gone_s = min_reads, agree, gone_s
        self.open: list[Sighting] = []
        self.count = 0

    def add(self, found: Found, pts: float) -> Sighting:
        """The read joins the nearest open sighting (or starts one); returns it, voted."""
        self.sweep(pts)
        text = found.read.text
        apart = [(distance(s.voted.text, text), s) for s in self.open if s.voted is not None]
        near = [(d, s) for d, s in apart if d <= NEAR]
        nearest = min(near, key=lambda pair: pair[0])[1] if near else None
        if nearest is None:
            nearest = Sighting(pts)
            self.open.append(nearest)
        nearest.reads.append(found)
        nearest.last = pts
        nearest.voted = vote([f.read for f in nearest.reads])
        return nearest

    def holds(self, sighting: Sighting) -> bool:
        """Enough reads, and enough of them of the voted plate's length; a sighting that
        holds for the first time gets its number."""
        voted = sighting.voted
        total = len(sighting.reads)
        held = (
            voted is not None
            and total >= self.min_reads
            and voted.agreeing >= self.agree * total - 1e-9
        )
        if held and not sighting.number:
            self.count += 1
            sighting.number = self.count
        return held

    def sweep(self, pts: float) -> None:
        """Sightings not read for ``gone_s`` close (a stream that went back: all of them)."""
        self.open = [s for s in self.open if 0 <= pts - s.last < self.gone_s]
