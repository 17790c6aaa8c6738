"""A gallery: a folder with a folder of pictures per name, embedded once and matched by
cosine similarity. At start every picture must be usable (one line naming the first that is
not). While running a thread of its own (``GalleryWatcher``) looks for changes and reads only
the pictures added or rewritten: a picture that cannot be used is kept out with one warning
naming it, a folder that cannot be read leaves the old gallery in place, and the node's own
thread never waits for any of it."""

from __future__ import annotations

import logging
import os
import threading
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

Mark = tuple[int, int]
"""A file's (modification time in ns, size): what changes when it is rewritten."""


class Stopped(Exception):
    """The run was asked to stop while the gallery was being read."""


@dataclass(frozen=True)
class Picture:
    """One picture as last read: its name, mark and vector (None: refused, not tried again
    until the file changes)."""

    name: str
    mark: Mark
    vector: np.ndarray | None


def pictures_of(folder: Path) -> list[tuple[str, Path]]:
    """(name, picture) for every picture in the name folders, sorted. Raises ConfigError
    naming a name folder that cannot be listed."""
    found: list[tuple[str, Path]] = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            try:
                listed = sorted(entry.iterdir())
            except OSError as exc:
                raise ConfigError(f"gallery folder {entry} cannot be read ({exc.strerror})",
                                  key="gallery") from None  # fmt: skip
            found.extend((entry.name, p) for p in listed if p.suffix.lower() in PICTURES)
    return found


def mark_of(path: Path) -> Mark:
    try:
        stat = os.stat(path)
    except OSError:  # gone again: read (and refused) as it is, marked as never seen
        return (0, -1)
    return (stat.st_mtime_ns, stat.st_size)


def signature(folder: Path) -> dict[str, Mark]:
    """Every file under ``folder`` with its mark: what changes when a picture is added,
    removed or rewritten."""
    marks = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            mark = mark_of(Path(path))
            if mark[1] >= 0:  # not removed while listed
                marks[path] = mark
    return marks


class Gallery:
    """Names and their pictures' unit vectors; ``names`` and ``vectors`` change together."""

    def __init__(self, folder: str, embed: Embedder, threshold: float, min_side: int = 1) -> None:
        self.folder = Path(folder)
        self.threshold = threshold
        self.min_side = min_side
        """A picture with a shorter side is refused (the node's ``min_size``)."""
        self._embed = embed
        self._in_use: tuple[list[str], np.ndarray] = ([], np.zeros((0, 0), np.float32))
        self._pictures: dict[str, Picture] = {}
        self._signature: dict[str, Mark] = {}
        self.loads = 0
        """Times a reading was put in use (1 at start, +1 per change picked up)."""
        self.embedded = 0
        """Pictures embedded so far (a change reads only what is new)."""

    @property
    def names(self) -> list[str]:
        return self._in_use[0]

    @property
    def vectors(self) -> np.ndarray:
        return self._in_use[1]

    def load(self, stop: threading.Event | None = None) -> None:
        """Reads the whole folder; raises ConfigError (key ``gallery``) naming the first
        picture that cannot be used, Stopped when ``stop`` is set meanwhile."""
        self._read(strict=True, stop=stop)

    def reload(self, stop: threading.Event | None = None) -> bool:
        """Reads what changed; True when the result is in use (a picture that cannot be used
        kept out with a warning), False when the folder cannot be (the old gallery stays,
        and the same change is not tried again)."""
        try:
            self._read(strict=False, stop=stop)
        except (ConfigError, OSError) as exc:
            self._signature = signature(self.folder) if self.folder.is_dir() else {}
            reason = exc.message if isinstance(exc, ConfigError) else f"{self.folder}: {exc}"
            log.warning("gallery not reloaded, the previous one stays: %s", reason)
            return False
        return True

    def changed(self) -> bool:
        return self.folder.is_dir() and signature(self.folder) != self._signature

    def _read(self, *, strict: bool, stop: threading.Event | None) -> None:
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
        pictures: dict[str, Picture] = {}
        new: list[tuple[str, Path, Mark]] = []
        for name, path in found:
            mark = marks.get(str(path)) or mark_of(path)  # added since the walk: its own
            known = self._pictures.get(str(path))
            if known is not None and known.mark == mark and known.name == name:
                pictures[str(path)] = known
            else:
                new.append((name, path, mark))
        if new:
            log.info("gallery %s: reading %d pictures", self.folder, len(new))
        for name, path, mark in new:
            if stop is not None and stop.is_set():
                raise Stopped(f"stopped reading gallery {self.folder}")
            pictures[str(path)] = Picture(name, mark, self._vector_of(name, path, strict))
        # In the folder's order, as a first reading has them: the same gallery matches alike.
        in_order = [pictures[str(path)] for _, path in found]
        usable = [p for p in in_order if p.vector is not None]
        if not usable:
            raise ConfigError(f"gallery folder {self.folder}: no picture can be used",
                              key="gallery")  # fmt: skip
        vectors = np.stack([p.vector for p in usable if p.vector is not None])
        self._in_use = ([p.name for p in usable], vectors.astype(np.float32))
        self._pictures, self._signature = pictures, marks
        self.loads += 1
        log.info("gallery %s: %d pictures of %d names", self.folder, len(usable),
                 len({p.name for p in usable}))  # fmt: skip

    def _vector_of(self, name: str, path: Path, strict: bool) -> np.ndarray | None:
        """The picture's vector; None (warned about, naming it) when it cannot be used while
        running; at start (``strict``) the refusal is raised."""
        try:
            if name.lower() in RESERVED:
                raise ConfigError(
                    f"gallery picture {path}: '{name}' is the word for no match, not a name: "
                    "rename its folder",
                    key="gallery",
                )
            vector = self._embed(read_picture(path, self.min_side), str(path))
        except ConfigError as exc:
            if strict:
                raise
            log.warning("gallery: %s; kept out", exc.message)
            return None
        self.embedded += 1
        return vector

    def match(self, vectors: np.ndarray) -> list[Match]:
        """Each unit vector's best name (its best picture's similarity)."""
        names, known = self._in_use  # one reading, whatever the watcher puts in use meanwhile
        if not len(names):
            return [Match(UNKNOWN, 0.0) for _ in vectors]
        similarity = vectors @ known.T
        matches = []
        for row in similarity:
            best = int(np.argmax(row))
            value = float(row[best])
            name = names[best] if value >= self.threshold else UNKNOWN
            matches.append(Match(name, value))
        return matches


class GalleryWatcher:
    """A thread that looks at the gallery every ``every_s`` and reads what changed; the
    node sees the new ``loads`` on its next batch. ``stop`` ends it, mid-reading too."""

    def __init__(self, gallery: Gallery, every_s: float, node: str) -> None:
        self.gallery = gallery
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"{node}-gallery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                if self.gallery.changed():
                    self.gallery.reload(self._stop)
            except Stopped:
                return
            except Exception as exc:
                log.warning("gallery not reloaded, the previous one stays: %s: %s",
                            type(exc).__name__, exc)  # fmt: skip
