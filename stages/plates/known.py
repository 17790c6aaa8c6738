"""Known plates: a list of plates with names (a file, the config, or both), and which of them
a read is, tolerating a misread character or two (``tolerance``) but never naming a read that
is as close to two known plates."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.plates.text import PlateShape, distance, normalised


@dataclass(frozen=True)
class Match:
    plate: str
    """The known plate (normalised)."""
    name: str
    distance: int
    """Characters the read differs by (0: exact)."""


class KnownPlates:
    """Normalised plate -> name."""

    def __init__(self, names: Mapping[str, str], tolerance: int = 1) -> None:
        self.names = dict(names)
        self.tolerance = tolerance
        # A held plate is matched on every frame its vehicle is drawn or counted: the search
        # over the list is made once per text (the list does not change during a run).
        self._matched = functools.lru_cache(maxsize=1024)(self._nearest)

    def __len__(self) -> int:
        return len(self.names)

    def match(self, text: str) -> Match | None:
        """The known plate ``text`` (normalised) is: the same, else the one nearest within
        ``tolerance`` characters; None when none is that near, or when two are as near (a
        read between two known plates names neither)."""
        return self._matched(text)

    def _nearest(self, text: str) -> Match | None:
        name = self.names.get(text)
        if name is not None:
            return Match(text, name, 0)
        best: list[tuple[int, str]] = []
        for plate in self.names:
            if abs(len(plate) - len(text)) > self.tolerance:
                continue
            apart = distance(plate, text)
            if apart <= self.tolerance:
                best.append((apart, plate))
        if not best:
            return None
        best.sort()
        if len(best) > 1 and best[1][0] == best[0][0]:
            return None
        apart, plate = best[0]
        return Match(plate, self.names[plate], apart)


def read_known(path: str, shape: PlateShape) -> dict[str, str]:
    """A known-plates file: one plate a line, then its name (``KX-4921  Alice's van``; a comma
    or tab may separate them), ``#`` starts a comment. A line that is not that is an error
    naming the file and the line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the known plates: {exc}", file=path) from None
    names: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        plate, name = _split(line)
        if not name:
            raise ConfigError(
                f"'{raw.strip()}': expected a plate and a name (KX-4921 Alice's van)",
                file=path,
                line=number,
            )
        names[_checked(plate, shape, names, f"{path}:{number}")] = name
    return names


def _split(line: str) -> tuple[str, str]:
    """A plate may have a space in it (``7HJK 582``): with a comma or tab the plate is what
    comes before it; else the first word, or the first two where they make the plate."""
    for separator in (",", "\t"):
        if separator in line:
            plate, _, name = line.partition(separator)
            return plate.strip(), name.strip()
    words = line.split()
    if len(words) >= 3 and any(c.isdigit() for c in words[1]) and len(words[1]) <= 4:
        return f"{words[0]} {words[1]}", " ".join(words[2:])
    return words[0], " ".join(words[1:])


def checked_names(names: Mapping[str, str], shape: PlateShape, where: str) -> dict[str, str]:
    """The config's ``known_plates`` table, normalised and checked."""
    out: dict[str, str] = {}
    for plate, name in names.items():
        out[_checked(plate, shape, out, f"{where} '{plate}'")] = name
    return out


def _checked(plate: str, shape: PlateShape, seen: Mapping[str, str], where: str) -> str:
    text = normalised(plate)
    if not shape.fits(text):
        raise ConfigError(
            f"{where}: '{plate}' is not plate-shaped ({shape.min_chars}-{shape.max_chars} of "
            f"[{shape.allowed}] once spaces and dashes are dropped)"
        )
    if text in seen:
        raise ConfigError(f"{where}: '{plate}' is listed twice")
    return text
