"""A gallery: a folder per name, embedded once, matched by cosine similarity, read again when
it changes, and a change that cannot be used leaves the old one in place."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.objects.gallery import UNKNOWN, Gallery
from vapipe.stages.objects.outputs import unit

COLOURS = {"red": (0, 0, 255), "green": (0, 255, 0), "blue": (255, 0, 0)}


def by_colour(picture: np.ndarray, path: str) -> np.ndarray:
    """A stand-in embedding: the picture's mean colour (what the tests can reason about)."""
    if picture.mean() < 1:
        raise ConfigError(f"gallery picture {path}: nothing in it", key="gallery")
    return unit(picture.reshape(1, -1, 3).mean(axis=1).astype(np.float32))[0]


def write(path: Path, colour: tuple[int, int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((8, 8, 3), colour, np.uint8))


def test_names_match_their_pictures_and_others_are_unknown(tmp_path: Path) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    write(tmp_path / "green" / "a.jpg", COLOURS["green"])
    (tmp_path / "green" / "notes.txt").write_text("not a picture")
    gallery = Gallery(str(tmp_path), by_colour, threshold=0.9)
    gallery.load()
    assert sorted(gallery.names) == ["green", "red"]
    queries = unit(np.array([[10, 20, 250], [0, 250, 5], [250, 0, 0]], np.float32))
    matches = gallery.match(queries)
    assert [m.name for m in matches] == ["red", "green", UNKNOWN]
    assert matches[0].similarity > 0.99 and matches[2].similarity < 0.1


def test_an_empty_or_missing_folder_and_an_unusable_picture_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Gallery(str(tmp_path / "none"), by_colour, 0.5).load()
    (tmp_path / "empty" / "alice").mkdir(parents=True)
    with pytest.raises(ConfigError, match="has no pictures") as caught:
        Gallery(str(tmp_path / "empty"), by_colour, 0.5).load()
    assert caught.value.key == "gallery"
    write(tmp_path / "dark" / "bob" / "1.png", (0, 0, 0))
    with pytest.raises(ConfigError, match=r"bob/1\.png: nothing in it"):
        Gallery(str(tmp_path / "dark"), by_colour, 0.5).load()
    broken = tmp_path / "broken" / "carol" / "1.png"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a png")
    with pytest.raises(ConfigError, match="cannot be read"):
        Gallery(str(tmp_path / "broken"), by_colour, 0.5).load()


def test_a_change_is_picked_up_and_a_bad_one_keeps_the_old_gallery(tmp_path: Path) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    gallery = Gallery(str(tmp_path), by_colour, threshold=0.9)
    gallery.load()
    assert not gallery.changed()
    write(tmp_path / "blue" / "1.png", COLOURS["blue"])
    assert gallery.changed()
    assert gallery.reload() and sorted(gallery.names) == ["blue", "red"]
    assert gallery.loads == 2
    write(tmp_path / "black" / "1.png", (0, 0, 0))
    assert gallery.changed() and not gallery.reload()
    assert sorted(gallery.names) == ["blue", "red"]
    assert not gallery.changed()  # the bad change is not retried until the folder changes
    picture = tmp_path / "red" / "1.png"
    stat = picture.stat()
    os.utime(picture, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert gallery.changed()
