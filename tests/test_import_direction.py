"""Imports point one way: the commands (``pipeline/cli/``) -> the service (``pipeline/serve/``)
-> the shards (``pipeline/shards/``) -> the runtime (``pipeline/``'s own modules); the stages
and the models import only the runtime (and each other). A back-arrow is found wherever it is
written: at the top of a module, inside a function, as ``from vapipe.pipeline import serve``.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"pipeline": "vapipe.pipeline", "stages": "vapipe.stages", "models": "vapipe.models"}
ROOMS = ("serve", "shards", "cli")

ALLOWED = {
    "runtime": {"runtime", "models"},
    "shards": {"runtime", "shards", "stages", "models"},
    "serve": {"runtime", "shards", "serve", "stages", "models"},
    "cli": {"runtime", "shards", "serve", "cli", "stages", "models"},
    "stages": {"runtime", "stages", "models"},
    "models": {"runtime", "stages", "models"},
}
"""What each part may import. The runtime names stages' classes for type checking only."""


def part_of(module: str) -> str | None:
    """The part of the code a dotted module name belongs to (None: outside the packages)."""
    parts = module.split(".")
    if parts[:2] == ["vapipe", "pipeline"]:
        return parts[2] if len(parts) > 2 and parts[2] in ROOMS else "runtime"
    if parts[:2] in (["vapipe", "stages"], ["vapipe", "models"]):
        return parts[1]
    return None


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imported(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) for every import of a vapipe module; ``from vapipe.pipeline import
    serve`` imports the room ``vapipe.pipeline.serve``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                room = node.module == "vapipe.pipeline" and alias.name in ROOMS
                found.append((node.lineno, f"{node.module}.{alias.name}" if room else node.module))
    unique = dict.fromkeys(found)
    return [(line, name) for line, name in unique if name.startswith("vapipe.")]


def back_imports(root: Path) -> list[str]:
    """Every import under ``root``'s packages that points the wrong way, one line each."""
    wrong = []
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("").parts
            module = ".".join((package, *rel)).removesuffix(".__init__")
            here = part_of(module)
            assert here is not None
            tree = ast.parse(path.read_text(encoding="utf-8"))
            typing_only = _type_checking_lines(tree)
            for line, name in imported(tree):
                there = part_of(name)
                if there is None or there in ALLOWED[here]:
                    continue
                if here == "runtime" and there == "stages" and line in typing_only:
                    continue
                where = path.relative_to(root)
                wrong.append(f"{where}:{line} imports {name} ({here} may not import {there})")
    return wrong


def test_imports_point_one_way() -> None:
    assert back_imports(REPO) == []


def test_the_rooms_and_the_runtime_are_where_the_rules_say() -> None:
    rooms = {p.name for p in (REPO / "pipeline").iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(ROOMS)
    for room in ROOMS:  # the tests mirror the rooms
        assert list((REPO / "tests" / "pipeline" / room).glob("test_*.py")), room
    assert part_of("vapipe.pipeline.runner") == "runtime"
    assert part_of("vapipe.pipeline.serve.http_api") == "serve"
    assert part_of("vapipe.pipeline.shards") == "shards"
    assert part_of("vapipe.stages.nms") == "stages"
    assert part_of("vapipe") is None


PLANTED = [
    # (file, import planted in it, what the report must say)
    ("pipeline/runner.py", "from vapipe.pipeline.serve.streams import Service",
     "pipeline/runner.py:{line} imports vapipe.pipeline.serve.streams (runtime may not import serve)"),  # noqa: E501
    ("pipeline/config.py", "def later():\n    from vapipe.pipeline import cli",
     "pipeline/config.py:{line} imports vapipe.pipeline.cli (runtime may not import cli)"),
    ("pipeline/shards/worker.py", "import vapipe.pipeline.serve.shard_side",
     "pipeline/shards/worker.py:{line} imports vapipe.pipeline.serve.shard_side (shards may not import serve)"),  # noqa: E501
    ("pipeline/serve/streams.py", "from vapipe.pipeline.cli.main import report",
     "pipeline/serve/streams.py:{line} imports vapipe.pipeline.cli.main (serve may not import cli)"),  # noqa: E501
    ("stages/nms.py", "from vapipe.pipeline.shards.plan import partition",
     "stages/nms.py:{line} imports vapipe.pipeline.shards.plan (stages may not import shards)"),
    ("pipeline/graph.py", "from vapipe.stages.nms import NmsStage",
     "pipeline/graph.py:{line} imports vapipe.stages.nms (runtime may not import stages)"),
]  # fmt: skip


@pytest.mark.parametrize(("target", "planted", "report"), PLANTED)
def test_a_planted_back_import_is_reported(
    tmp_path: Path, target: str, planted: str, report: str
) -> None:
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder)
    path = tmp_path / target
    text = path.read_text(encoding="utf-8")
    line = len(text.splitlines()) + 1 + planted.count("\n")
    path.write_text(text + planted + "\n", encoding="utf-8")
    assert back_imports(tmp_path) == [report.format(line=line)]


def test_a_stage_type_named_for_type_checking_only_is_allowed(tmp_path: Path) -> None:
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder)
    path = tmp_path / "pipeline" / "graph.py"
    planted = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vapipe.stages.nms import NmsStage\n"  # noqa: E501
    path.write_text(path.read_text(encoding="utf-8") + planted, encoding="utf-8")
    assert back_imports(tmp_path) == []
