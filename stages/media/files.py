"""Files written per event: a writer thread that never holds the pipeline up (a bounded
queue; a full one drops and counts), paths with ``{source_id}`` and ``{date}`` under a media
folder, and retention by age and total size that deletes only the files the node itself wrote
(its own list of them, kept in the folder across runs)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.media.paths import check_file_id

log = logging.getLogger(__name__)

Item = TypeVar("Item")
UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def day_of(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d")


def sub_folder(template: str, source_id: str, epoch_s: float) -> str:
    """``{source_id}/{date}`` -> ``cam/2026-12-04`` (the UTC day of ``epoch_s``)."""
    if "{source_id" in template:
        check_file_id(source_id, template)
    try:
        return template.format(source_id=source_id, date=day_of(epoch_s))
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"bad placeholder in '{template}': only {{source_id}} and {{date}} are known ({exc})",
            key="path",
        ) from None


def inside_folder(template: str) -> str:
    """A ``path`` validator: a folder inside the media folder, whatever the source and day."""
    try:
        filled = sub_folder(template, "cam", 0.0)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if Path(filled).is_absolute() or ".." in Path(filled).parts:
        raise ValueError(f"'{template}' must be a folder inside dir (relative, without '..')")
    return template


def file_stem(epoch_s: float, seq: int, event: dict[str, Any]) -> str:
    """``083015.120-412-line_cross-t7-road``: the time first, so a folder lists in order."""
    when = datetime.fromtimestamp(epoch_s, UTC).strftime("%H%M%S.%f")[:10]
    track = event.get("track_id")
    where = event.get("line") or event.get("zone") or "-"
    parts = [when, str(seq), event["event"], "-" if track is None else f"t{track}", where]
    return UNSAFE.sub("_", "-".join(parts))


def write_whole(path: Path, data: bytes) -> None:
    """The file appears whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


class Writer(Generic[Item]):
    """One thread doing ``work(item)`` for the items handed to it, in order. ``submit`` never
    blocks: a full queue refuses the item (counted in ``dropped``)."""

    def __init__(self, name: str, size: int, work: Callable[[Item], None]) -> None:
        self._queue: queue.Queue[Item | None] = queue.Queue(size)
        self._work = work
        self.dropped = self.done = self.failed = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: Item) -> bool:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._work(item)
                self.done += 1
            except Exception as exc:  # one bad file must not stop the others
                self.failed += 1
                if self.failed == 1:
                    log.warning("%s: could not write a file (%s); counting", self._thread.name, exc)

    def close(self) -> None:
        """Write what is queued, then stop."""
        self._queue.put(None)
        self._thread.join()


@dataclass
class Written:
    path: str
    """Relative to the media folder."""
    size: int
    at: float


class Retention:
    """The files one node wrote under ``root``, listed in ``root/.NODE.written`` (JSON lines),
    and deleted oldest first once older than ``max_age_s`` or while together larger than
    ``max_bytes``. Files not in the list (a user's own) are never touched."""

    def __init__(
        self, root: Path, node: str, max_age_s: float | None, max_bytes: int | None
    ) -> None:
        self.root, self.max_age_s, self.max_bytes = root, max_age_s, max_bytes
        self.listing = root / f".{node}.written"
        self.files: list[Written] = []
        self.deleted = 0
        self._lock = threading.Lock()
        with contextlib.suppress(FileNotFoundError):
            for line in self.listing.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    entry = json.loads(line)
                    written = Written(str(entry["path"]), int(entry["size"]), float(entry["at"]))
                    if (root / written.path).is_file():
                        self.files.append(written)
        self.files.sort(key=lambda written: written.at)

    @property
    def total(self) -> int:
        return sum(written.size for written in self.files)

    def add(self, relative: str, at: float | None = None) -> None:
        written = Written(relative, (self.root / relative).stat().st_size, at or time.time())
        with self._lock:
            self.files.append(written)
            with self.listing.open("a", encoding="utf-8") as listing:
                listing.write(json.dumps(written.__dict__) + "\n")
        self.prune()

    def prune(self, now: float | None = None) -> list[str]:
        """Delete what is over the limits; returns the paths deleted."""
        now = time.time() if now is None else now
        gone: list[str] = []
        with self._lock:
            total = self.total
            while self.files:
                oldest = self.files[0]
                too_old = self.max_age_s is not None and now - oldest.at > self.max_age_s
                too_big = self.max_bytes is not None and total > self.max_bytes
                if not (too_old or too_big):
                    break
                self.files.pop(0)
                total -= oldest.size
                self._delete(oldest.path)
                gone.append(oldest.path)
            if gone:
                self.deleted += len(gone)
                text = "".join(json.dumps(written.__dict__) + "\n" for written in self.files)
                write_whole(self.listing, text.encode())
        return gone

    def _delete(self, relative: str) -> None:
        path = self.root / relative
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        # Folders it emptied go too (a day's folder), up to the media folder; a folder with
        # anything else in it stays.
        folder = path.parent
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent
