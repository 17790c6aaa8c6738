"""A gallery: a folder per name, embedded once, matched by cosine similarity; at start every
picture usable or one line naming the first that is not (a truncated or undecodable file, a
decompression bomb, one too small, a FIFO, a reserved name, a file for a folder); read again
when it changes, a picture that cannot be used kept out with a warning naming it, and a
folder that cannot be read leaving the old gallery in place."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.objects.gallery import UNKNOWN, Gallery, GalleryWatcher, Stopped
from vapipe.stages.objects.outputs import unit

COLOURS = {"red": (0, 0, 255), "green": (0, 255, 0), "blue": (255, 0, 0)}


def by_colour(picture: np.ndarray, path: str) -> np.ndarray:
    """A stand-in embedding: the picture's mean colour (what the tests can reason about)."""
    if picture.mean() < 1:
        raise ConfigError(f"gallery picture {path}: nothing in it", key="gallery")
    return unit(picture.reshape(1, -1, 3).mean(axis=1).astype(np.float32))[0]


def write(path: Path, colour: tuple[int, int, int], size: int = 8) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((size, size, 3), colour, np.uint8))


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
    with pytest.raises(ConfigError, match=r"carol/1\.png cannot be decoded \(cannot identify"):
        Gallery(str(tmp_path / "broken"), by_colour, 0.5).load()


def bad_pictures(folder: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of unusable picture, and the words of its refusal."""
    good = cv2.imencode(".jpg", np.full((64, 64, 3), (0, 0, 255), np.uint8))[1].tobytes()
    kinds: dict[str, tuple[Path, str]] = {}
    truncated = folder / "dan" / "1.jpg"
    truncated.parent.mkdir(parents=True)
    truncated.write_bytes(good[: len(good) // 2])
    kinds["truncated"] = (
        truncated, r"dan/1\.jpg cannot be decoded \((image file is truncated|Truncated File Read)"
    )  # fmt: skip
    tiny = folder / "eve" / "1.png"
    write(tiny, COLOURS["red"], size=1)
    kinds["tiny"] = (tiny, r"eve/1\.png is 1 x 1: under min_size 16 pixels")
    bomb = folder / "fay" / "1.png"
    bomb.parent.mkdir(parents=True)
    bomb.write_bytes(png_header(32000, 32000))
    kinds["bomb"] = (bomb, r"fay/1\.png declares 1,024,000,000 pixels: over 40 million")
    fifo = folder / "gus" / "1.jpg"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    kinds["fifo"] = (fifo, r"gus/1\.jpg is not a regular file")
    huge = folder / "hal" / "1.jpg"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as sparse:
        sparse.truncate(60 * 2**20)  # 60 MiB that take no disk
    kinds["huge"] = (huge, r"hal/1\.jpg is 60 MiB: over 50 MiB, refused before reading")
    reserved = folder / "Unknown" / "1.png"
    write(reserved, COLOURS["green"], size=32)
    kinds["reserved"] = (reserved, r"'Unknown' is the word for no match, not a name")
    return kinds


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (a 1-bit picture, as bombs are): its
    pixels are never there to decode."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)  # fmt: skip

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0"))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("kind", ["truncated", "tiny", "bomb", "fifo", "huge", "reserved"])
def test_an_unusable_picture_is_refused_at_start_naming_it(tmp_path: Path, kind: str) -> None:
    write(tmp_path / "ann" / "1.png", COLOURS["green"], size=32)
    path, words = bad_pictures(tmp_path / "bad")[kind]
    folder = tmp_path / kind
    target = folder / path.parent.name / path.name
    target.parent.mkdir(parents=True)
    os.replace(path, target)
    write(folder / "ann" / "1.png", COLOURS["green"], size=32)
    with pytest.raises(ConfigError, match=words) as caught:
        Gallery(str(folder), by_colour, 0.5, min_side=16).load()
    assert caught.value.key == "gallery"


def test_a_file_for_the_folder_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "gallery.jpg").write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"gallery\.jpg is a file, not a folder of name folders"):
        Gallery(str(tmp_path / "gallery.jpg"), by_colour, 0.5).load()


def test_while_running_unusable_pictures_are_kept_out_each_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "ann" / "1.png", COLOURS["green"], size=32)
    gallery = Gallery(str(tmp_path), by_colour, threshold=0.9, min_side=16)
    gallery.load()
    kinds = bad_pictures(tmp_path)
    write(tmp_path / "bob" / "1.png", COLOURS["red"], size=32)
    with caplog.at_level("WARNING"):
        assert gallery.changed() and gallery.reload()
    assert sorted(gallery.names) == ["ann", "bob"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == len(kinds), warned
    for path, _ in kinds.values():
        assert any(str(path) in line and line.endswith("kept out") for line in warned), path


def test_a_change_is_picked_up_and_an_unreadable_folder_keeps_the_old_gallery(
    tmp_path: Path,
) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    gallery = Gallery(str(tmp_path), by_colour, threshold=0.9)
    gallery.load()
    assert not gallery.changed()
    write(tmp_path / "blue" / "1.png", COLOURS["blue"])
    assert gallery.changed()
    assert gallery.reload() and sorted(gallery.names) == ["blue", "red"]
    assert gallery.loads == 2
    write(tmp_path / "black" / "1.png", (0, 0, 0))
    assert gallery.changed() and gallery.reload()  # the black picture kept out
    assert sorted(gallery.names) == ["blue", "red"] and gallery.loads == 3
    for name in ("red", "blue"):  # now nothing can be used: the old gallery stays
        write(tmp_path / name / "1.png", (0, 0, 0))
    assert gallery.changed() and not gallery.reload()
    assert sorted(gallery.names) == ["blue", "red"] and gallery.loads == 3
    assert not gallery.changed()  # the bad change is not retried until the folder changes
    picture = tmp_path / "red" / "1.png"
    stat = picture.stat()
    os.utime(picture, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert gallery.changed()


def test_a_change_reads_only_the_pictures_added_or_rewritten(tmp_path: Path) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    write(tmp_path / "green" / "1.png", COLOURS["green"])
    read: list[str] = []

    def counting(picture: np.ndarray, path: str) -> np.ndarray:
        read.append(Path(path).parent.name)
        return by_colour(picture, path)

    gallery = Gallery(str(tmp_path), counting, threshold=0.9)
    gallery.load()
    assert read == ["green", "red"] and gallery.embedded == 2
    write(tmp_path / "blue" / "1.png", COLOURS["blue"])
    assert gallery.reload() and read[2:] == ["blue"]
    assert gallery.names == ["blue", "green", "red"]  # the folder's order, as at start
    write(tmp_path / "green" / "1.png", COLOURS["red"], size=9)  # rewritten: other size
    assert gallery.reload() and read[3:] == ["green"]
    assert [m.name for m in gallery.match(unit(np.array([[0, 255, 0]], np.float32)))] == [
        UNKNOWN]  # fmt: skip
    (tmp_path / "red" / "1.png").unlink()
    assert gallery.reload() and read[4:] == [] and gallery.names == ["blue", "green"]
    assert gallery.loads == 4 and gallery.embedded == 4


def test_a_picture_kept_out_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    gallery = Gallery(str(tmp_path), by_colour, threshold=0.9)
    gallery.load()
    write(tmp_path / "black" / "1.png", (0, 0, 0))
    with caplog.at_level("WARNING"):
        assert gallery.reload()
        write(tmp_path / "blue" / "1.png", COLOURS["blue"])
        assert gallery.reload()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "black/1.png" in warned[0], warned
    assert gallery.names == ["blue", "red"]


def test_a_name_folder_that_cannot_be_listed_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    write(tmp_path / "bob" / "1.png", COLOURS["blue"])
    listing = Path.iterdir

    def iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self.name == "bob":  # as root, chmod cannot make a folder unreadable
            raise PermissionError(13, "Permission denied")
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    with pytest.raises(ConfigError, match=r"gallery folder .*/bob cannot be read \(Permission"):
        Gallery(str(tmp_path), by_colour, 0.5).load()
    monkeypatch.setattr(Path, "iterdir", listing)
    gallery = Gallery(str(tmp_path), by_colour, 0.5)
    gallery.load()
    write(tmp_path / "bob" / "2.png", COLOURS["green"])
    monkeypatch.setattr(Path, "iterdir", iterdir)
    assert not gallery.reload() and gallery.names == ["bob", "red"]  # the old one stays


def test_a_stop_request_ends_the_reading_between_pictures(tmp_path: Path) -> None:
    for index in range(5):
        write(tmp_path / f"p{index}" / "1.png", COLOURS["red"])
    stop = threading.Event()

    def stopping(picture: np.ndarray, path: str) -> np.ndarray:
        stop.set()  # Ctrl-C while the first picture is read
        return by_colour(picture, path)

    gallery = Gallery(str(tmp_path), stopping, 0.5)
    with pytest.raises(Stopped):
        gallery.load(stop)
    assert gallery.embedded == 1 and gallery.loads == 0


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_the_watcher_reads_changes_on_its_own_thread_and_stops_mid_reading(
    tmp_path: Path,
) -> None:
    write(tmp_path / "red" / "1.png", COLOURS["red"])
    threads: list[str] = []
    hold = threading.Event()

    def recording(picture: np.ndarray, path: str) -> np.ndarray:
        threads.append(threading.current_thread().name)
        if "slow" in path:
            hold.wait(60)  # a reading that takes long: stop() must not wait for its end
        return by_colour(picture, path)

    gallery = Gallery(str(tmp_path), recording, threshold=0.9)
    gallery.load()
    watcher = GalleryWatcher(gallery, 0.01, "who")
    watcher.start()
    write(tmp_path / "blue" / "1.png", COLOURS["blue"])
    wait_for(lambda: gallery.loads == 2, "the change to be read")
    assert gallery.names == ["blue", "red"] and threads[1:] == ["who-gallery"]
    write(tmp_path / "slow" / "1.png", COLOURS["green"])
    write(tmp_path / "slow" / "2.png", COLOURS["green"])
    wait_for(lambda: len(threads) == 3, "the slow picture's reading to begin")
    stopper = threading.Thread(target=watcher.stop)
    stopper.start()
    wait_for(lambda: watcher._stop.is_set(), "the stop request")
    hold.set()  # the picture being read ends; the next one is never started
    stopper.join(60)
    assert not stopper.is_alive() and len(threads) == 3 and gallery.loads == 2
