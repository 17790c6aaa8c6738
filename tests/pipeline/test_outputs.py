"""pipeline/outputs.py: names compared as sets, after links are resolved, and by inode."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.outputs import FileClaims, Names, identity, resolved


@pytest.mark.parametrize(
    ("one", "other", "expected"),
    [
        (Names("/o/a.mp4"), Names("/o/a.mp4"), True),
        (Names("/o/a.mp4"), Names("/o/b.mp4"), False),
        (Names("/o/b.mp4"), Names("/o/a.mp4"), False),
        # one name against a set: inside it only with the prefix, the suffix and room for both
        (Names("/o/seg-", ".mp4", True), Names("/o/seg-00001.mp4"), True),
        (Names("/o/seg-", ".mp4", True), Names("/o/seg-.mp4"), True),
        (Names("/o/abc", "cba", True), Names("/o/abcba"), False),  # they would share letters
        (Names("/o/seg-", ".mp4", True), Names("/o/cut-00001.mp4"), False),
        (Names("/o/seg-", ".mp4", True), Names("/o/seg-00001.mkv"), False),
        (Names("/o/seg-00001.mp4"), Names("/o/seg-", ".mp4", True), True),  # either way round
        (Names("/o/cut-1.mp4"), Names("/o/seg-", ".mp4", True), False),
        # two sets: some name is in both where a prefix starts the other and a suffix ends it
        (Names("/o/", ".jpg", True), Names("/o/cam-", ".jpg", True), True),
        (Names("/o/cam-", ".jpg", True), Names("/o/", ".jpg", True), True),
        (Names("/o/cam-", "1.jpg", True), Names("/o/cam-", ".jpg", True), True),
        (Names("/o/cam-", ".jpg", True), Names("/o/cam-", "1.jpg", True), True),
        (Names("/o/cam-", ".jpg", True), Names("/o/dog-", ".jpg", True), False),
        (Names("/o/cam-", ".jpg", True), Names("/o/cam-", ".png", True), False),
    ],
)
def test_names_overlap_as_sets(one: Names, other: Names, expected: bool) -> None:
    assert one.overlaps(other) is expected


def test_names_are_values() -> None:
    names = Names("/o/seg-", ".mp4", many=True)
    assert {names, Names("/o/seg-", ".mp4", many=True)} == {names}  # hashable, by value
    with pytest.raises(dataclasses.FrozenInstanceError):
        names.prefix = "/elsewhere/"  # type: ignore[misc]


def test_names_read_as_a_pattern_or_a_file() -> None:
    assert str(Names("/o/seg-", ".mp4", many=True)) == "/o/seg-*.mp4"
    assert str(Names("/o/a.mp4")) == "/o/a.mp4"


def test_links_are_resolved_in_the_folder_and_for_one_file(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert resolved(str(tmp_path / "link" / "a.mp4")) == Names(str(real / "a.mp4"))
    many = resolved(Names(str(tmp_path / "link" / "seg-"), ".mp4", True))
    assert many == Names(str(real / "seg-"), ".mp4", True)
    (real / "file.mp4").touch()
    (tmp_path / "alias.mp4").symlink_to(real / "file.mp4")
    assert resolved(str(tmp_path / "alias.mp4")).prefix == str(real / "file.mp4")


def test_a_bare_pattern_is_in_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolved(Names("seg-", ".mp4", True)).prefix == os.path.join(
        os.path.realpath(tmp_path), "seg-"
    )


def test_identity_is_the_device_and_inode_of_an_existing_single_file(tmp_path: Path) -> None:
    one = tmp_path / "a.mp4"
    assert identity(Names(str(one))) is None  # not there yet
    one.write_bytes(b"x")
    info = one.stat()
    assert identity(Names(str(one))) == (info.st_dev, info.st_ino)
    os.link(one, tmp_path / "b.mp4")
    assert identity(Names(str(tmp_path / "b.mp4"))) == identity(Names(str(one)))
    assert identity(Names(str(tmp_path / "a"), ".mp4", many=True)) is None


def test_an_output_over_an_input_names_the_input(tmp_path: Path) -> None:
    claims = FileClaims()
    claims.read(str(tmp_path / "in.mp4"), "source cam")
    assert claims.write(str(tmp_path / "in.mp4"), "video") == "source cam"
    assert claims.write(str(tmp_path / "out.mp4"), "video") is None


def test_a_second_writer_of_a_name_is_refused_naming_the_first(tmp_path: Path) -> None:
    claims = FileClaims()
    assert claims.write(str(tmp_path / "out.mp4"), "video a") is None
    assert claims.write(str(tmp_path / "out.mp4"), "video b") == "also written by video a"
    # a set of names that holds the first is refused too
    pattern = Names(str(tmp_path / "out"), ".mp4", True)
    assert claims.write(pattern, "snapshots") == "also written by video a"


def test_a_hard_link_or_a_symlinked_folder_to_an_input_is_the_input(tmp_path: Path) -> None:
    source = tmp_path / "in.mp4"
    source.write_bytes(b"x")
    os.link(source, tmp_path / "hard.mp4")
    (tmp_path / "via").symlink_to(tmp_path)
    claims = FileClaims()
    claims.read(str(source), "source cam")
    assert claims.write(str(tmp_path / "hard.mp4"), "video") == "source cam"
    assert claims.write(str(tmp_path / "via" / "in.mp4"), "video") == "source cam"


def test_other_existing_files_are_not_the_input_whatever_their_inodes(tmp_path: Path) -> None:
    files = []
    for name in ("x.mp4", "y.mp4", "z.mp4"):
        (tmp_path / name).write_bytes(b"x")
        files.append(tmp_path / name)
    low, middle, high = sorted(files, key=lambda f: f.stat().st_ino)
    claims = FileClaims()
    claims.read(str(low), "source a")
    claims.read(str(high), "source b")
    assert claims.write(str(middle), "video") is None


def test_a_name_that_cannot_be_a_path_is_a_config_error() -> None:
    claims = FileClaims()
    with pytest.raises(ConfigError, match="invalid path") as caught:
        claims.write("out/\0.mp4", "video")
    assert caught.value.key == "path"
    with pytest.raises(ConfigError, match="invalid path"):
        claims.read("in/\0.mp4", "source")
