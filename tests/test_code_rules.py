"""Rules the code keeps so that people and tools can read it: small modules, a type checker
set up for pipeline/ and stages/, and no silenced type error without its reason."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("vapipe", "pipeline", "stages", "models")
MOST_LINES = 400


def modules() -> list[Path]:
    return sorted(path for folder in PACKAGES for path in (REPO / folder).rglob("*.py"))


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(REPO)): count
        for path in modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_every_type_ignore_names_its_code_and_reason() -> None:
    bare = []
    for path in modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if "type: ignore" not in line:
                continue
            coded = re.search(r"type: ignore\[[a-z-]+(,[a-z-]+)*\]", line)
            above = lines[number - 1].strip() if number else ""
            if not coded or not above.startswith("#"):
                bare.append(f"{path.relative_to(REPO)}:{number + 1}")
    assert not bare, f"type: ignore without a code, or without a comment above: {bare}"


def test_mypy_checks_pipeline_and_stages() -> None:
    settings = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    rooms = {"vapipe.cli", "vapipe.serve", "vapipe.shards", "vapipe.quantize"}
    assert {"vapipe.pipeline", "vapipe.stages", *rooms} <= set(settings["packages"])
    assert settings.get("warn_unused_ignores") is True
    assert "&& .venv/bin/mypy &&" in (REPO / "README.md").read_text(encoding="utf-8")
    # CI runs the README's test command as the README writes it (tools/readme_command.py).
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert '"$(python3 tools/readme_command.py test)"' in ci


def reads_by_name(source: str) -> list[int]:
    """Lines where a stage's config or class is asked for an attribute by name
    (``getattr(node.config, "uri", ...)``, ``hasattr(spec.stage_cls, ...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
        ):
            target = ast.unparse(node.args[0])
            if re.search(r"(config|stage_cls|stage|table|backend)\b", target):
                found.append(node.lineno)
    return found


def test_the_runtime_and_the_rooms_ask_stages_through_declared_hooks() -> None:
    """What pipeline/ and the application (vapipe/) need of a stage is declared on the stage
    or its config (``models``, ``native_stacks``, ``preloads``, ``media_folder``,
    ``history_file``, ``for_restart``, ``uri_of``...), never read by key."""
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for folder in ("pipeline", "vapipe")
        for path in sorted((REPO / folder).rglob("*.py"))
        for line in reads_by_name(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"a stage config or class read by name: {found}"


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ('uri = getattr(node.config, "uri", "")', [1]),
        ('x = hasattr(spec.stage_cls, "media")', [1]),
        ('n = getattr(self.config, "workers", 1)', [1]),
        ('seq = getattr(item, "seq", None)', []),
    ],
)
def test_a_read_by_name_is_found(source: str, lines: list[int]) -> None:
    assert reads_by_name(source) == lines
