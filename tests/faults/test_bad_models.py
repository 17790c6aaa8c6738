"""Bad models: a file that is not ONNX and one cut short (exit 2 naming the key), one no
runtime loads (exit 1 as the run starts), and one whose output no YOLO head fits; each a
one-line error naming the model or the key, never a traceback."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, cli, unloadable_model


def not_onnx(path: Path) -> Path:
    path.write_bytes(b"not a model")
    return path


def cut_short(path: Path) -> Path:
    path.write_bytes(asset("models", "yolox_nano.onnx").read_bytes()[:100_000])
    return path


def flat_output_model(path: Path) -> Path:
    """A valid ONNX model with an image input and a 2-D output: no YOLO layout."""
    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 12288])
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["images"], ["out"])], "g", [image], [out]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize(
    ("make", "code", "expected"),
    [
        pytest.param(not_onnx, 2, "node 'det' key 'model': *: not an ONNX model", id="not-onnx"),
        pytest.param(cut_short, 2, "node 'det' key 'model': *: not an ONNX model", id="cut-short"),
        pytest.param(unloadable_model, 1, "stage 'det': cannot load model", id="unloadable"),
        pytest.param(
            flat_output_model,
            2,
            "node 'det' key 'family': ",
            id="no-yolo-layout",
        ),
    ],
)
def test_bad_models_are_one_line(tmp_path: Path, make, code: int, expected: str) -> None:  # type: ignore[no-untyped-def]
    model = make(tmp_path / "model.onnx")
    result = cli(str(FILE_CONFIG), "--set", f"det.model={model}", cwd=tmp_path)
    assert result.returncode == code, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert all(part in last for part in expected.split("*")), last
    assert "Traceback" not in result.stderr
