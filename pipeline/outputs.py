"""What a run writes against what it reads, checked before anything opens.

Outputs are compared by the names actually written (a video's ``NAME.partial.mp4`` while it is
being written, a segment's ``NAME-00001.mp4``, a picture per frame), after symlinks are
resolved, and by inode, so a hard link to an input is caught too. Open-ended sets of names
(every segment, every ``{seq}``, every picture in an input folder) are a prefix and a suffix
with anything between them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vapipe.pipeline.errors import ConfigError


@dataclass(frozen=True)
class Names:
    """One file (``many`` false), or every file named ``prefix`` + anything + ``suffix``."""

    prefix: str
    suffix: str = ""
    many: bool = False

    def overlaps(self, other: Names) -> bool:
        if not self.many and not other.many:
            return self.prefix == other.prefix
        if not self.many:
            return other.overlaps(self)
        if not other.many:
            name = other.prefix
            return (
                len(name) >= len(self.prefix) + len(self.suffix)
                and name.startswith(self.prefix)
                and name.endswith(self.suffix)
            )
        return (self.prefix.startswith(other.prefix) or other.prefix.startswith(self.prefix)) and (
            self.suffix.endswith(other.suffix) or other.suffix.endswith(self.suffix)
        )

    def __str__(self) -> str:
        return f"{self.prefix}*{self.suffix}" if self.many else self.prefix


def resolved(names: str | Names) -> Names:
    """Symlinks and ``..`` resolved in the folder part (and the file, for one file)."""
    if isinstance(names, str):
        return Names(os.path.realpath(names))
    head, tail = os.path.split(names.prefix)
    folder = os.path.realpath(head or ".")
    return Names(os.path.join(folder, tail), names.suffix, names.many)


def identity(names: Names) -> tuple[int, int] | None:
    """(device, inode) of an existing single file: two names for one file are one file."""
    if names.many:
        return None
    try:
        info = os.stat(names.prefix)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


class FileClaims:
    """Every name read or written so far, and who reads or writes it. One file's claim is
    found by its name or inode in a dictionary, so that thousands of sinks are checked in
    linear time; only open-ended sets of names are compared one by one."""

    def __init__(self) -> None:
        self._files: dict[str, str] = {}  # one file's name -> its owner
        self._inodes: dict[tuple[int, int], str] = {}
        self._sets: list[tuple[Names, str]] = []  # open-ended sets of names, their owners

    def read(self, names: str | Names, owner: str) -> None:
        """An input: written by nobody."""
        real = _real(names)
        self._claim(real, identity(real), owner)

    def write(self, names: str | Names, owner: str) -> str | None:
        """An output; the description of what it would destroy, or None (then claimed)."""
        real = _real(names)
        inode = identity(real)
        clash = self._owner_of(real, inode)
        if clash is None:
            self._claim(real, inode, f"also written by {owner}")
        return clash

    def _owner_of(self, real: Names, inode: tuple[int, int] | None) -> str | None:
        if not real.many:
            found = self._files.get(real.prefix)
            if found is None and inode is not None:
                found = self._inodes.get(inode)
            if found is not None:
                return found
        else:
            found = next(
                (owner for name, owner in self._files.items() if real.overlaps(Names(name))),
                None,
            )
            if found is not None:
                return found
        return next((owner for other, owner in self._sets if other.overlaps(real)), None)

    def _claim(self, real: Names, inode: tuple[int, int] | None, owner: str) -> None:
        if real.many:
            self._sets.append((real, owner))
            return
        self._files.setdefault(real.prefix, owner)
        if inode is not None:
            self._inodes.setdefault(inode, owner)


def _real(names: str | Names) -> Names:
    try:
        return resolved(names)
    except (ValueError, OSError) as exc:  # a NUL byte, a name too long
        raise ConfigError(f"invalid path {str(names)!r}: {exc}", key="path") from None
