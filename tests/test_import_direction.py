"""Imports read top-down, one way, and the folders say which way: the commands
(``vapipe/cli/``, ``python -m vapipe``) -> the Python API (``vapipe/api.py``) and the service
(``vapipe/serve/``) -> the shards (``vapipe/shards/``) -> the model tools
(``vapipe/quantize/``) -> the stages (``stages/``) -> the runtime (``pipeline/``, with the
catalogue of models and clips it reads, ``models/``). A module's part is the folder it sits in:
no module is an exception. Type-only imports count, and no module imports itself back through
others (no loops). A back-arrow or a loop is found wherever it is written: at the top of a
module, inside a function, under ``TYPE_CHECKING``, as ``from vapipe import serve``.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {
    "pipeline": "vapipe.pipeline",
    "stages": "vapipe.stages",
    "models": "vapipe.models",
    "vapipe": "vapipe",
}
PARTS = {
    "pipeline": "runtime",
    "models": "runtime",
    "stages": "stages",
    "quantize": "quantize",
    "shards": "shards",
    "serve": "serve",
    "api": "api",
    "cli": "cli",
    "__main__": "cli",
}
"""``vapipe.<folder or module>`` -> its part; ``vapipe`` itself (its ``__init__``) is the API's."""

RANK = {"runtime": 0, "stages": 1, "quantize": 2, "shards": 3, "serve": 4, "api": 4, "cli": 5}
"""Each part may import its own modules and those of parts ranked lower, never higher nor
beside it (the Python API and the service know nothing of each other)."""


def part_of(module: str) -> str | None:
    """The part of the code a dotted module name belongs to (None: outside the packages)."""
    parts = module.split(".")
    if parts[0] != "vapipe":
        return None
    return PARTS.get(parts[1]) if len(parts) > 1 else "api"


def may_import(here: str, there: str) -> bool:
    return here == there or RANK[there] < RANK[here]


def modules(root: Path) -> dict[str, Path]:
    """Every module of the packages under ``root``, by its dotted name."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("").parts
            found[".".join((package, *rel)).removesuffix(".__init__")] = path
    return found


def imported(
    tree: ast.Module, known: set[str] | dict[str, Path] = frozenset()
) -> list[tuple[int, str]]:
    """(line, module) for every import of a vapipe module: ``from vapipe.pipeline import
    serve`` imports the room ``vapipe.serve``, and ``from a.b import c`` imports the
    module ``a.b.c`` where ``known`` has one by that name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                found.append((node.lineno, whole if whole in known else node.module))
    unique = dict.fromkeys(found)
    return [(line, name) for line, name in unique if name.split(".")[0] == "vapipe"]


def back_imports(root: Path) -> list[str]:
    """Every import under ``root``'s packages that points the wrong way, one line each."""
    wrong = []
    known = modules(root)
    for module, path in known.items():
        here = part_of(module)
        assert here is not None, f"{module} is in no part: add its folder to PARTS"
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8")), known):
            there = part_of(name)
            if there is None or may_import(here, there):
                continue
            where = path.relative_to(root)
            wrong.append(f"{where}:{line} imports {name} ({here} may not import {there})")
    return wrong


def _resolved(name: str, known: dict[str, Path]) -> str | None:
    """The known module an imported name lands in (a package for a name defined in it)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) or None


def import_loops(root: Path) -> list[list[str]]:
    """Each group of modules that import one another round in a loop (type-only imports
    and imports inside functions too), sorted; none when the modules read one way."""
    known = modules(root)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = {
            _resolved(name, known) for _, name in imported(ast.parse(path.read_text()), known)
        }
        edges[module] = {t for t in targets if t is not None and t != module}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(edges[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                loops.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(loops)


def test_imports_point_one_way() -> None:
    assert back_imports(REPO) == []


def test_no_module_imports_itself_back() -> None:
    assert import_loops(REPO) == []


def test_every_folder_is_a_part_and_the_runtime_is_pipeline_alone() -> None:
    rooms = {p.name for p in (REPO / "vapipe").iterdir() if (p / "__init__.py").is_file()}
    assert rooms == {"cli", "serve", "shards", "quantize"}
    assert not [p for p in (REPO / "pipeline").iterdir() if (p / "__init__.py").is_file()]
    for room in rooms:  # the tests mirror the rooms
        assert list((REPO / "tests" / room).glob("test_*.py")), room
    assert all(part_of(module) is not None for module in modules(REPO))
    assert part_of("vapipe.pipeline.runner") == "runtime"
    assert part_of("vapipe.serve.http_api") == "serve"
    assert part_of("vapipe.shards") == "shards"
    assert part_of("vapipe.stages.nms") == "stages"
    assert part_of("vapipe.models") == "runtime"
    assert part_of("vapipe.quantize.quantize") == "quantize"
    assert part_of("vapipe.api") == "api" and part_of("vapipe.__main__") == "cli"
    assert part_of("vapipe") == "api" and part_of("numpy") is None
    assert not may_import("api", "serve") and not may_import("serve", "api")
    assert may_import("cli", "api") and not may_import("api", "cli")


def _copy(tmp_path: Path) -> None:
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, tmp_path / folder)


PLANTED = [
    # (file, import planted in it, what the report must say)
    ("pipeline/runner.py", "from vapipe.serve.streams import Service",
     "pipeline/runner.py:{line} imports vapipe.serve.streams (runtime may not import serve)"),
    ("pipeline/config.py", "def later():\n    from vapipe import cli",
     "pipeline/config.py:{line} imports vapipe.cli (runtime may not import cli)"),
    ("vapipe/shards/worker.py", "import vapipe.serve.shard_side",
     "vapipe/shards/worker.py:{line} imports vapipe.serve.shard_side (shards may not import serve)"),  # noqa: E501
    ("vapipe/serve/streams.py", "from vapipe.cli.main import report",
     "vapipe/serve/streams.py:{line} imports vapipe.cli.main (serve may not import cli)"),
    ("stages/nms.py", "from vapipe.shards.plan import partition",
     "stages/nms.py:{line} imports vapipe.shards.plan (stages may not import shards)"),
    ("pipeline/graph.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vapipe.stages.nms import NmsStage",  # noqa: E501
     "pipeline/graph.py:{line} imports vapipe.stages.nms (runtime may not import stages)"),
    ("vapipe/api.py", "from vapipe.cli.common import fail",
     "vapipe/api.py:{line} imports vapipe.cli.common (api may not import cli)"),
    ("stages/track/stage.py", "from vapipe.quantize.quantize import quantize",
     "stages/track/stage.py:{line} imports vapipe.quantize.quantize (stages may not import quantize)"),  # noqa: E501
]  # fmt: skip


@pytest.mark.parametrize(("target", "planted", "report"), PLANTED)
def test_a_planted_back_import_is_reported(
    tmp_path: Path, target: str, planted: str, report: str
) -> None:
    _copy(tmp_path)
    path = tmp_path / target
    text = path.read_text(encoding="utf-8")
    line = len(text.splitlines()) + 1 + planted.count("\n")
    path.write_text(text + planted + "\n", encoding="utf-8")
    assert back_imports(tmp_path) == [report.format(line=line)]


LOOPS = [
    # (file, import planted in it, the modules of the loop it closes)
    ("pipeline/stage.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vapipe.pipeline.runner import Runner",  # noqa: E501
     ["vapipe.pipeline.node", "vapipe.pipeline.runner", "vapipe.pipeline.stage"]),
    ("stages/nms.py", "def later():\n    from vapipe.stages.infer import model",
     ["vapipe.stages.infer.model", "vapipe.stages.nms"]),
    ("stages/infer/backends/base.py", "from vapipe.stages.infer.backends import load_backend",
     ["vapipe.stages.infer.backends", "vapipe.stages.infer.backends.base"]),
]  # fmt: skip


@pytest.mark.parametrize(("target", "planted", "loop"), LOOPS)
def test_a_planted_loop_is_found(
    tmp_path: Path, target: str, planted: str, loop: list[str]
) -> None:
    _copy(tmp_path)
    path = tmp_path / target
    path.write_text(path.read_text(encoding="utf-8") + planted + "\n", encoding="utf-8")
    found = import_loops(tmp_path)
    assert len(found) == 1 and set(loop) <= set(found[0]), found


def test_a_submodule_named_in_a_from_import_is_that_module() -> None:
    tree = ast.parse("from vapipe.stages.infer.backends import openvino, load_backend\n")
    known = {
        "vapipe.stages.infer.backends": Path(),
        "vapipe.stages.infer.backends.openvino": Path(),
    }
    assert imported(tree, known) == [
        (1, "vapipe.stages.infer.backends.openvino"), (1, "vapipe.stages.infer.backends")
    ]  # fmt: skip
