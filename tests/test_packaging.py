"""The install: every package folder is declared, and a built wheel works on its own, under
the ``vapipe`` import name, with its data files (OpenCL kernel, model manifest)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"vapipe": "vapipe", "pipeline": "vapipe.pipeline", "stages": "vapipe.stages"}
FOLDERS["models"] = "vapipe.models"


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return set(project["tool"]["setuptools"]["packages"])


def tracked_copy(tree: Path) -> Path:
    """The tracked files only, as a fresh clone has them: nothing stale or untracked slips in."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in tracked:
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    return tree


def test_every_package_folder_is_declared() -> None:
    found = set()
    for folder, package in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *parts)))
    assert found == declared(), f"pyproject.toml packages differ: {found ^ declared()}"


def test_wheel_installs_and_runs_under_the_vapipe_name(tmp_path: Path) -> None:
    tree = tracked_copy(tmp_path / "tree")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("vapipe-*.whl")
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert not (site / "pipeline").exists() and not (site / "stages").exists(), (
        "generic top-level names were installed"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = (
        "import vapipe, vapipe.stages, vapipe.models, importlib.resources as r;"
        "print(vapipe.stages.__file__);"
        "print(r.files('vapipe.stages.preprocess').joinpath('kernels/letterbox.cl').is_file()"
        " and r.files('vapipe.serve').joinpath('web/page.js').is_file());"
        "print(sorted(vapipe.models.manifest()['models']))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(str(site)), f"imported from {lines[0]}, not the wheel"
    assert lines[1] == "True", "the OpenCL kernel or the service's page is missing from the wheel"
    assert "yolox-nano" in lines[2]
    listed = subprocess.run(
        [sys.executable, "-m", "vapipe", "stages", "infer"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0 and listed.stdout.startswith("[infer]"), listed.stderr


def test_the_code_map_matches_the_tree() -> None:
    guide = (REPO / "docs" / "writing-a-stage.md").read_text(encoding="utf-8")
    section = guide.split("## Where things go: the code map", 1)[1].split("\n## ", 1)[0]
    mapped = {
        line.split("`")[1].rstrip("/") for line in section.splitlines() if line.startswith("| `")
    }
    for folder in mapped:
        assert (REPO / folder).is_dir(), f"the code map names {folder}/, which does not exist"
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    top = {path.split("/")[0] for path in tracked if "/" in path and not path.startswith(".")}
    subpackages = {
        str(init.parent.relative_to(REPO))
        for top in ("pipeline", "stages")
        for init in (REPO / top).rglob("__init__.py")
        if init.parent != REPO / top
    }
    missing = (top | subpackages) - mapped
    assert not missing, f"folders missing from the code map: {sorted(missing)}"
    # A module a row names is in that row's folder.
    for line in section.splitlines():
        if line.startswith("| `"):
            folder = line.split("`")[1].rstrip("/")
            for module in re.findall(r"`([a-z_]+\.py)`", line):
                assert (REPO / folder / module).is_file(), f"the code map names {folder}/{module}"
