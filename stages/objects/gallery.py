"""A gallery: a folder with a folder of pictures per name, embedded once and matched by
cosine similarity. At start every picture must be usable (one line naming the first that is
not); read again when a file in it changes, a picture that cannot be used is kept out with a
warning naming it, and a folder that cannot be read leaves the old gallery in place, so a bad
picture copied in never stops a run."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.objects.pictures import read_picture

log = logging.getLogger(__name__)

PICTURES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
Embedder = Callable[[np.ndarray, str], np.ndarray]
"""(BGR picture, its path) -> its unit vector; raises ConfigError naming the path when the
picture shows nothing to embed (no face)."""


@dataclass(frozen=True)
class Match:
    name: str
    """The best name at ``match`` or above, else ``unknown``."""
    similarity: float
    """Its cosine similarity (the best name's, also when under ``match``)."""


UNKNOWN = "unknown"
RESERVED = frozenset({UNKNOWN})
"""Words a gallery name may not be: an event's name ``unknown`` says that nobody matched."""


def pictures_of(folder: Path) -> list[tuple[str, Path]]:
    """(name, picture) for every picture in the name folders, sorted."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            for picture in sorted(entry.iterdir()):
                if picture.suffix.lower() in PICTURES:
                    found.append((entry.name, picture))
    return found


def signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a picture is added, removed or rewritten."""
    marks = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)
            except OSError:  # removed while listed
                continue
            marks.append((path, stat.st_mtime_ns, stat.st_size))
    return tuple(marks)


class Gallery:
    """Names and their pictures' unit vectors."""

    def __init__(self, folder: str, embed: Embedder, threshold: float, min_side: int = 1) -> None:
        self.folder = Path(folder)
        self.threshold = threshold
        self.min_side = min_side
        """A picture with a shorter side is refused (the node's ``min_size``)."""
        self._embed = embed
        self.names: list[str] = []
        self.vectors = np.zeros((0, 0), np.float32)
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self.loads = 0
        """Times it was read (1 at start, +1 per change picked up)."""

    def load(self, strict: bool = True) -> None:
        """Reads the folder; raises ConfigError (key ``gallery``) naming what is wrong. Not
        ``strict`` (a reload while running): a picture that cannot be used is kept out, with a
        warning naming it, and the others are used."""
        if not self.folder.is_dir():
            what = "is a file, not a folder of name folders" if self.folder.is_file() else (
                "does not exist")  # fmt: skip
            raise ConfigError(f"gallery folder {self.folder} {what}", key="gallery")
        marks = signature(self.folder)
        found = pictures_of(self.folder)
        if not found:
            raise ConfigError(
                f"gallery folder {self.folder} has no pictures: put each name's pictures in a "
                f"folder of its own ({self.folder}/NAME/1.jpg)",
                key="gallery",
            )
        names, vectors = [], []
        for name, path in found:
            try:
                if name.lower() in RESERVED:
                    raise ConfigError(
                        f"gallery picture {path}: '{name}' is the word for no match, not a "
                        "name: rename its folder",
                        key="gallery",
                    )
                vectors.append(self._embed(read_picture(path, self.min_side), str(path)))
            except ConfigError as exc:
                if strict:
                    raise
                log.warning("gallery: %s; kept out", exc.message)
                continue
            names.append(name)
        if not names:
            raise ConfigError(f"gallery folder {self.folder}: no picture can be used",
                              key="gallery")  # fmt: skip
        self.names, self.vectors = names, np.stack(vectors).astype(np.float32)
        self._signature = marks
        self.loads += 1
        log.info("gallery %s: %d pictures of %d names", self.folder, len(names), len(set(names)))

    def changed(self) -> bool:
        return self.folder.is_dir() and signature(self.folder) != self._signature

    def reload(self) -> bool:
        """Reads the folder again; True when the new pictures are in use (a picture that
        cannot be used kept out), False when the folder cannot be (the old gallery stays)."""
        try:
            self.load(strict=False)
        except (ConfigError, OSError) as exc:
            self._signature = signature(self.folder) if self.folder.is_dir() else ()
            reason = exc.message if isinstance(exc, ConfigError) else f"{self.folder}: {exc}"
            log.warning("gallery not reloaded, the previous one stays: %s", reason)
            return False
        return True

    def match(self, vectors: np.ndarray) -> list[Match]:
        """Each unit vector's best name (its best picture's similarity)."""
        if not len(self.names):
            return [Match(UNKNOWN, 0.0) for _ in vectors]
        similarity = vectors @ self.vectors.T
        matches = []
        for row in similarity:
            best = int(np.argmax(row))
            value = float(row[best])
            name = self.names[best] if value >= self.threshold else UNKNOWN
            matches.append(Match(name, value))
        return matches
