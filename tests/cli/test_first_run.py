"""The first run on a machine without the assets: everything is checked before any stage
opens, and what is missing comes as one line that says where it was looked for and the three
ways to fix it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bare_env(home: Path) -> dict[str, str]:
    """No VAPIPE_ASSETS, an empty cache, no network allowed."""
    env = {k: v for k, v in os.environ.items() if k != "VAPIPE_ASSETS"}
    env.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "VAPIPE_OFFLINE": "1"})
    return env


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vapipe", *args], cwd=cwd, env=bare_env(cwd / "home"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_missing_assets_are_one_line_before_anything_opens(tmp_path: Path) -> None:
    result = run(str(REPO / "configs" / "file.toml"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    message = lines[0]
    cache = tmp_path / "home" / ".cache" / "vapipe"
    for part in (
        "error: missing sample 'people' (people.mp4, node 'cam'), "
        "model 'yolox-nano' (yolox_nano.onnx, node 'det')",
        f"{cache / 'media'}",
        "VAPIPE_OFFLINE is set",
        "set VAPIPE_ASSETS to a folder holding models/ and media/",
        "run 'run-pipeline fetch sample:people yolox-nano' where there is a network",
        f"copy the files to {cache / 'media' / 'people.mp4'}, "
        f"{cache / 'models' / 'yolox_nano.onnx'}",
    ):
        assert part in message, part
    assert not (tmp_path / "out").exists(), "a stage opened before the check"


def test_fetch_all_offline_is_one_summary(tmp_path: Path) -> None:
    result = run("fetch", "--all", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    from vapipe.pipeline.assets import manifest_entries

    count = len(manifest_entries("models")) + len(manifest_entries("media"))
    expected = f"error: {count} of {count} not fetched (yolox-nano, "
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert "medi " not in lines[0]


def test_models_list_offline_names_every_way_to_get_a_model_with_whole_paths(
    tmp_path: Path,
) -> None:
    result = run("models", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    cache = tmp_path / "home" / ".cache" / "vapipe" / "models"
    assert "yolox-nano" in result.stdout and "not here (yolox_nano.onnx)" in result.stdout
    assert "run-pipeline models fetch yolox-nano" not in result.stdout  # it fails offline
    hint = result.stdout.strip().splitlines()[-1]
    for part in (
        f"Looked in {tmp_path / 'assets' / 'models'}, {cache}.",
        "run-pipeline models fetch NAME where there is a network (VAPIPE_OFFLINE is set here)",
        "set VAPIPE_ASSETS to a folder holding models/FILE",
        f"copy FILE to {cache}/FILE (e.g. {cache / 'yolox_nano.onnx'})",
    ):
        assert part in hint, part


def test_fetch_offline_names_each_file_where_it_would_be_copied(tmp_path: Path) -> None:
    result = run("fetch", "yolox-nano", "sample:people", cwd=tmp_path)
    assert result.returncode == 1
    cache = tmp_path / "home" / ".cache" / "vapipe"
    (line,) = result.stderr.strip().splitlines()
    assert "set VAPIPE_ASSETS to a folder holding models/ and media/" in line
    assert "run this again where there is a network" in line
    assert line.endswith(
        f"copy the files to {cache / 'models' / 'yolox_nano.onnx'}, "
        f"{cache / 'media' / 'people.mp4'}"
    ), line
