"""Outputs never destroy inputs or each other: caught before anything opens, exit 2, with
both nodes named; the input is untouched."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, REPO, cli


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
