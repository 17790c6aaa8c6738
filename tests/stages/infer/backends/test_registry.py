"""The backends' registry: every backend module of the package found on first use (no list to
keep), plugins of the ``vapipe.backends`` entry-point group loaded beside them and a broken
one named without hiding the others, a key registered twice refused, and what a node asks of
a backend (``Request``) with its defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends import registry
from vapipe.stages.infer.backends.registry import BackendSettings, Request, backend

REPO = Path(__file__).resolve().parents[4]

PLUGIN = """
from typing import Literal
from vapipe.stages.infer.backends.registry import BackendSettings, backend

class EchoConfig(BackendSettings):
    type: Literal["echo"] = "echo"

@backend("echo", EchoConfig)
def load(config, request):
    raise NotImplementedError
"""

PROBE = """
import json
from vapipe.stages.infer.backends import config, registry
from vapipe.stages.infer.config import InferConfig
node = None
if "echo" in registry.types():
    node = InferConfig.model_validate({"model": "m.onnx", "backend": "echo"})
print(json.dumps({"types": list(registry.types()), "errors": registry.plugin_errors,
                  "echo": type(node.backend).__name__ if node else None}))
"""


def probe(site: Path | None = None) -> dict:
    """What a fresh interpreter that imports only the backend table's module finds."""
    paths = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO)])}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_packages_backends_are_found_without_a_list() -> None:
    found = probe()
    assert found["types"] == ["onnxruntime", "torch", "auto"] and found["errors"] == {}


def test_a_plugin_backend_joins_the_table_and_a_broken_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "echo_backend.py").write_text(PLUGIN)
    (tmp_path / "broken_backend.py").write_text("import no_such_package_here\n")
    for name in ("echo_backend", "broken_backend"):
        info = tmp_path / f"{name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        entry = name.split("_")[0]
        (info / "entry_points.txt").write_text(f"[vapipe.backends]\n{entry} = {name}\n")
    found = probe(tmp_path)
    assert found["types"][:3] == ["onnxruntime", "torch", "auto"] and "echo" in found["types"]
    assert found["echo"] == "EchoConfig"
    assert found["errors"] == {
        "broken": "broken_backend: ModuleNotFoundError: No module named 'no_such_package_here'"
    }


def test_a_key_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_types", {})

    def first(config: object, request: Request) -> None:  # type: ignore[return]
        ...

    def second(config: object, request: Request) -> None:  # type: ignore[return]
        ...

    backend("x", BackendSettings)(first)
    backend("x", BackendSettings)(first)  # the same loader again (a module imported twice)
    with pytest.raises(ValueError, match="backend 'x' registered twice"):
        backend("x", BackendSettings)(second)
    assert registry._types["x"].load is first and registry._types["x"].config is BackendSettings


def test_what_a_node_asks_and_its_defaults() -> None:
    asked = Request("m.onnx", "det", 8)
    assert (asked.head, asked.workers, asked.rect) == (None, 1, False)
    with pytest.raises(AttributeError):
        asked.workers = 2  # type: ignore[misc]
    assert issubclass(BackendSettings, StageConfig) and "type" in BackendSettings.model_fields
