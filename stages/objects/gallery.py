"""A gallery: a folder with a folder of pictures per name, embedded once and matched by
cosine similarity. Read again when a file in it changes; a new gallery that cannot be used
leaves the old one in place (logged), so a bad picture copied in never stops a run."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vapipe.pipeline.errors import ConfigError

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

    def __init__(self, folder: str, embed: Embedder, threshold: float) -> None:
        self.folder = Path(folder)
        self.threshold = threshold
        self._embed = embed
        self.names: list[str] = []
        self.vectors = np.zeros((0, 0), np.float32)
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self.loads = 0
        """Times it was read (1 at start, +1 per change picked up)."""

    def load(self) -> None:
        """Reads the folder; raises ConfigError (key ``gallery``) naming what is wrong."""
        if not self.folder.is_dir():
            raise ConfigError(f"gallery folder {self.folder} does not exist", key="gallery")
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
            picture = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if picture is None:
                raise ConfigError(f"gallery picture {path} cannot be read", key="gallery")
            vectors.append(self._embed(picture, str(path)))
            names.append(name)
        self.names, self.vectors = names, np.stack(vectors).astype(np.float32)
        self._signature = marks
        self.loads += 1
        log.info("gallery %s: %d pictures of %d names", self.folder, len(names), len(set(names)))

    def changed(self) -> bool:
        return self.folder.is_dir() and signature(self.folder) != self._signature

    def reload(self) -> bool:
        """Reads the folder again; True when the new pictures are in use."""
        try:
            self.load()
        except ConfigError as exc:
            self._signature = signature(self.folder) if self.folder.is_dir() else ()
            log.warning("gallery not reloaded, the previous one stays: %s", exc.message)
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
