"""The README's editable install is one that static tools can read: jedi (the engine behind
many editors' "go to definition") follows every ``vapipe.*`` import of a fresh install to the
file in the checkout."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.conftest import unlinked_files
from tests.test_packaging import REPO, tracked_copy

jedi = pytest.importorskip("jedi")

README = (REPO / "README.md").read_text(encoding="utf-8")


def readme_install_options() -> list[list[str]]:
    """The options of each `pip install ... -e` in the README's two set-up commands."""
    blocks = re.findall(r"```sh\n(.*?)```", README.split("## Two commands", 1)[1], re.DOTALL)
    found = []
    for block in blocks:
        for command in block.split("&&"):
            words = shlex.split(command)
            if words[:1] == [".venv/bin/pip"] and words[1] == "install":
                found.append([w for w in words[2:] if w != "-q"])
    return found


def test_both_readme_commands_install_in_strict_mode() -> None:
    options = readme_install_options()
    assert len(options) == 2, options
    for words in options:
        assert words[-2] == "-e" and words[-1].startswith("."), words
        assert "--config-settings" in words, words
        assert words[words.index("--config-settings") + 1] == "editable_mode=strict", words
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "--config-settings editable_mode=strict -e '.[dev]'" in ci


@pytest.fixture(scope="module")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the checkout installed exactly as the README does, into a new environment.
    Offline: the new environment borrows this one's pip and setuptools (a path entry), and
    dependencies are not installed, since only where imports lead is checked."""
    base = tmp_path_factory.mktemp("editable")
    clone = tracked_copy(base / "clone")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "borrowed-tools.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # Both commands share their options; they differ only in the extras of `-e TARGET`.
    (options,) = {tuple(words[:-2]) for words in readme_install_options()}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         *options, "-e", str(clone)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    return clone, venv


def declared_packages() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return project["tool"]["setuptools"]["packages"]


def source_of(clone: Path, dotted: str) -> Path:
    """Where `dotted` lives in the checkout, by pyproject's package-dir mapping."""
    project = tomllib.loads((clone / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = project["tool"]["setuptools"]["package-dir"]
    root = max((p for p in mapping if dotted == p or dotted.startswith(p + ".")), key=len)
    rest = dotted[len(root) :].lstrip(".").split(".") if dotted != root else []
    return clone.joinpath(mapping[root], *rest)


def goto(venv: Path, code: str, column: int) -> list:
    environment = jedi.create_environment(str(venv), safe=False)
    script = jedi.Script(code, path=str(venv.parent / "probe.py"), environment=environment)
    return script.goto(1, column, follow_imports=True)


@pytest.mark.parametrize("package", declared_packages())
def test_every_package_import_leads_to_the_checkout(fresh_install, package: str) -> None:
    clone, venv = fresh_install
    code = f"import {package}"
    found = goto(venv, code, len(code) - 1)
    assert found, f"jedi finds no definition for {package}"
    expected = source_of(clone, package) / "__init__.py"
    assert Path(found[0].module_path).resolve() == expected.resolve(), found[0].module_path


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("vapipe.pipeline.runner", "Runner"),
        ("vapipe.stages.infer.backends.providers", "choose"),
        ("vapipe.stages.infer.backends", "load_backend"),
        ("vapipe.stages.sinks.mqtt", "MqttSink"),
        ("vapipe.stages.nms", "NmsStage"),
        ("vapipe.stages.track.bytetrack", "ByteTracker"),
    ],
)
def test_go_to_definition_opens_the_file_in_the_checkout(fresh_install, module, name) -> None:
    clone, venv = fresh_install
    code = f"from {module} import {name}"
    (found,) = goto(venv, code, len(code) - 1)
    where = source_of(clone, module)
    where = where / "__init__.py" if where.is_dir() else where.with_suffix(".py")
    assert Path(found.module_path).resolve() == where.resolve()
    assert found.type in {"class", "function"} and found.name == name
    line = where.read_text(encoding="utf-8").splitlines()[found.line - 1]
    assert re.match(rf"(class|def) {name}\b", line), line


def test_a_module_added_after_the_install_is_named(fresh_install) -> None:
    clone, _ = fresh_install
    (tree,) = (clone / "build").glob("__editable__.vapipe-*")
    assert unlinked_files(clone, tree) == []
    added = clone / "stages" / "track" / "added_later.py"
    added.write_text("")
    try:
        assert unlinked_files(clone, tree) == ["stages/track/added_later.py"]
    finally:
        added.unlink()
