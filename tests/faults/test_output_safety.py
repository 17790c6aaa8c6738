"""Outputs never destroy inputs or each other: caught before anything opens, exit 2, with
both nodes named; the input is untouched."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, REPO, cli, unloadable_model


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            ["video.path=in.mp4"],
            "node 'video' key 'path': in.mp4 is the input of node 'cam': writing it would "
            "destroy it",
            id="video-over-input",
        ),
        pytest.param(
            ["events.path=./sub/../in.mp4"],
            "node 'events' key 'path': ./sub/../in.mp4 is the input of node 'cam'",
            id="events-over-input-by-another-spelling",
        ),
        pytest.param(
            ["events.path=out/annotated.mp4"],
            "node 'events' key 'path': out/annotated.mp4 is also written by node 'video'",
            id="two-sinks-one-file",
        ),
    ],
)
def test_an_output_that_would_destroy_a_file_is_exit_2(
    tmp_path: Path, overrides: list[str], expected: str
) -> None:
    clip = tmp_path / "in.mp4"
    shutil.copy(asset("media", "people.mp4"), clip)
    before = digest(clip)
    args = [str(FILE_CONFIG), "--set", "cam.uri=in.mp4"]
    for override in overrides:
        args += ["--set", override]
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert expected in last, last
    assert digest(clip) == before, "the input was modified"
    assert not (tmp_path / "out" / "annotated.mp4").exists(), "something ran"


def test_sample_inputs_and_per_source_templates_are_checked(tmp_path: Path) -> None:
    people = asset("media", "people.mp4")
    result = cli(str(FILE_CONFIG), "--set", f"video.path={people}", cwd=tmp_path)
    assert result.returncode == 2 and "is the input of node 'cam'" in result.stderr
    multi = REPO / "configs" / "multi.toml"
    result = cli(str(multi), "--set", "events.path=out/multi/cam3.mp4", cwd=tmp_path)
    assert result.returncode == 2
    assert "out/multi/cam3.mp4 is also written by node 'video'" in result.stderr


def _input_clip(folder: Path, name: str) -> Path:
    clip = folder / name
    clip.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(asset("media", "people.mp4"), clip)
    return clip


def _pictures(folder: Path, first: int = 0) -> Path:
    folder.mkdir()
    for index in range(first, first + 2):
        shutil.copy(asset("media", "dog.jpg"), folder / f"img{index}.jpg")
    return folder / f"img{first + 1}.jpg"


def _hard_link(folder: Path) -> Path:
    clip = _input_clip(folder, "in.mp4")
    (folder / "linked.jsonl").hardlink_to(clip)
    return clip


def _symlink(folder: Path) -> Path:
    clip = _input_clip(folder, "in.mp4")
    (folder / "out").mkdir()
    (folder / "out" / "events.jsonl").symlink_to(clip)
    return clip


# (what the folder holds: returns the file that must survive, the run's arguments, the error)
NAMES_ACTUALLY_WRITTEN = {
    "partial-name-of-the-video": (
        lambda d: _input_clip(d, "x.partial.mp4"),
        ["--set", "cam.uri=x.partial.mp4", "--set", "video.path=x.mp4"],
        "node 'video' key 'path': x.partial.mp4 is the input of node 'cam'",
    ),
    "segment-names": (
        lambda d: _input_clip(d, "rec-00001.mp4"),
        [
            "--set",
            "cam.uri=rec-00001.mp4",
            "--set",
            "video.path=rec.mp4",
            "--set",
            "video.segment_s=4",
        ],
        "node 'video' key 'path': rec-*.mp4 is the input of node 'cam'",
    ),
    "stats-over-the-input": (
        lambda d: _input_clip(d, "in.mp4"),
        ["--set", "cam.uri=in.mp4", "--stats", "in.mp4"],
        "--stats in.mp4 is the input of node 'cam': writing it would destroy it",
    ),
    "stats-over-the-events": (
        lambda d: _input_clip(d, "in.mp4"),
        ["--set", "cam.uri=in.mp4", "--stats", "out/events.jsonl"],
        "--stats out/events.jsonl is also written by node 'events'",
    ),
    # Pictures the sequence would reach only later (img7, img8): its first name is free, so
    # only the pattern checked against the folder's files catches it.
    "picture-sequence-over-an-input-folder": (
        lambda d: _pictures(d / "imgs", first=7),
        ["--set", "cam.uri=imgs", "--set", "video.path=imgs/img{seq}.jpg"],
        "node 'video' key 'path': imgs/img*.jpg is the input of node 'cam'",
    ),
    "pictures-into-the-folder-read": (
        lambda d: _pictures(d / "imgs"),
        ["--set", "cam.uri=imgs", "--set", "video.path=imgs/latest.png"],
        "node 'video' key 'path': imgs/latest.png is the input of node 'cam'",
    ),
    "hard-link-to-the-input": (
        _hard_link,
        ["--set", "cam.uri=in.mp4", "--set", "events.path=linked.jsonl"],
        "node 'events' key 'path': linked.jsonl is the input of node 'cam'",
    ),
    "symlink-to-the-input": (
        _symlink,
        ["--set", "cam.uri=in.mp4"],
        "node 'events' key 'path': out/events.jsonl is the input of node 'cam'",
    ),
}


@pytest.mark.parametrize("case", NAMES_ACTUALLY_WRITTEN, ids=str)
def test_every_name_written_is_checked_against_the_inputs(tmp_path: Path, case: str) -> None:
    make, args, expected = NAMES_ACTUALLY_WRITTEN[case]
    kept = make(tmp_path)
    before = digest(kept)
    result = cli(str(FILE_CONFIG), *args, "--max-frames", "5", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert expected in last, last
    assert digest(kept) == before, "the input was modified"


@pytest.mark.parametrize("source_id", ["../../x", "a/b", "..", "a\\b"])
def test_a_source_id_cannot_write_outside_the_output_folder(tmp_path: Path, source_id: str) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    result = cli(
        str(FILE_CONFIG), "--set", f"cam.source_id='{source_id}'",
        "--set", "video.path=out/{source_id}.mp4", "--max-frames", "3", cwd=work,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"source_id {source_id!r} cannot be put in the file name" in result.stderr
    assert sorted(p.name for p in tmp_path.rglob("*.mp4")) == []


def test_a_second_segmented_run_numbers_on_and_keeps_the_first_runs_files(tmp_path: Path) -> None:
    args = [str(FILE_CONFIG), "--set", "video.segment_s=4", "--set", "video.keyframe_s=1",
            "--max-frames", "150"]  # fmt: skip
    first = cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    out = tmp_path / "out"
    first_files = {p.name: digest(p) for p in out.glob("annotated-*.mp4")}
    assert sorted(first_files) == ["annotated-00001.mp4", "annotated-00002.mp4"]
    # A run killed mid-segment leaves an unfinished one: it is that run's recording too.
    shutil.copy(out / "annotated-00002.mp4", out / "annotated-00003.partial.mp4")
    second = cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    names = sorted(p.name for p in out.glob("annotated*.mp4"))
    assert names == [f"annotated-{i:05d}.mp4" for i in range(1, 6)], names
    for name, before in first_files.items():
        assert digest(out / name) == before, f"{name} of the first run was replaced"
    assert "annotated-00003.partial.mp4 was left by an interrupted run" in second.stderr


def test_an_interrupted_recording_is_kept_aside_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    left = out / "annotated.partial.mp4"
    shutil.copy(asset("media", "people.mp4"), left)
    before = digest(left)
    result = cli(str(FILE_CONFIG), "--max-frames", "10", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (kept,) = out.glob("annotated.interrupted-*.mp4")
    assert digest(kept) == before
    assert not left.exists() and (out / "annotated.mp4").exists()


@pytest.mark.parametrize("shards", [1, 2])
def test_a_run_that_fails_before_its_first_frame_leaves_the_last_run_s_outputs(
    tmp_path: Path, shards: int
) -> None:
    sharded = ("--set", f"pipeline.shards={shards}")
    first = cli(str(FILE_CONFIG), "--max-frames", "10", *sharded, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    outputs = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    assert outputs["events.jsonl"] and outputs["annotated.mp4"]
    unloadable_model(tmp_path / "broken.onnx")  # loads as the run starts, and fails
    failed = cli(str(FILE_CONFIG), "--max-frames", "10", "--set", "det.model=broken.onnx",
                 *sharded, cwd=tmp_path)  # fmt: skip
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "cannot load model broken.onnx" in failed.stderr.strip().splitlines()[-1]
    after = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    assert after == outputs, "a failed start changed the last run's outputs"
    # A run that ran but had no event to write still replaces the file: no stale lines.
    quiet = cli(str(FILE_CONFIG), "--max-frames", "5", "--set", "events.empty_frames=false",
                "--set", "nms.conf=0.999", *sharded, cwd=tmp_path)  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert (tmp_path / "out" / "events.jsonl").read_bytes() == b""
