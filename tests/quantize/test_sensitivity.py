"""``--keep-float sensitive``: the nodes INT8 rounds worst, measured per channel with
onnxruntime's qdq_loss_debug, kept in float a few more at each try until the copy agrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vapipe.quantize import quantize as quantize_module
from vapipe.quantize.calibration import Sample
from vapipe.quantize.sensitivity import channel_sqnr, first_steps, noisiest_nodes


def spiked_model(path: Path) -> Path:
    """conv1 -> spike (one element times 1000: its range crushes the other channels to a
    few INT8 levels) -> conv2."""
    rng = np.random.default_rng(0)
    spike = np.ones((1, 4, 16, 16), np.float32)
    spike[0, 0, 0, 0] = 1e3
    weights = [
        numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.normal(size=(4, 4, 3, 3)).astype(np.float32), "w2"),
        numpy_helper.from_array(spike, "m"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["a", "m"], ["b"], name="spike"),
        helper.make_node("Conv", ["b", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "spiked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def frames() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.random((3, 16, 16), np.float32) for _ in range(8)]


def test_channel_sqnr_sees_the_channels_an_outlier_crushes() -> None:
    x = np.ones((1, 2, 4, 4))
    x[0, 0, 0, 0] = 1000.0
    crushed = x.copy()
    crushed[0, 1] = 0.0  # the ordinary channel rounded away
    whole = 20 * np.log10(np.linalg.norm(x) / np.linalg.norm(x - crushed))
    assert whole > 35  # the outlier's energy hides it
    assert channel_sqnr([x], [crushed]) == pytest.approx(
        (20 * np.log10(np.linalg.norm(x[0, 0]) / np.finfo(np.float64).eps) + 0.0) / 2
    )
    assert channel_sqnr([x], [x * 1.01]) == pytest.approx(40.0)
    assert channel_sqnr([np.ones(8)], [np.full(8, 1.1)]) == pytest.approx(20.0)


def test_the_node_whose_output_int8_rounds_worst_comes_first(tmp_path: Path) -> None:
    source = spiked_model(tmp_path / "float.onnx")
    target = tmp_path / "int8.onnx"
    sample = Sample(frames(), [], [])
    quantize_module._quantize_static(source, target, "x", sample, "minmax", [])
    ranked = noisiest_nodes(source, target, "x", sample.calibration)
    assert [name for name, _ in ranked] == ["spike", "conv2", "conv1"]
    assert ranked[0][1] < 3 < 30 < ranked[-1][1]


@pytest.mark.parametrize(
    ("count", "expected"),
    [(10, [0, 4, 8, 10]), (3, [0, 3]), (0, [0]), (70, [0, 4, 8, 16, 32, 64])],
)
def test_each_try_keeps_more_of_the_noisiest(count: int, expected: list[int]) -> None:
    ranked = [(f"n{i}", float(i)) for i in range(count)]
    steps = list(first_steps(ranked))
    assert [len(step) for step in steps] == expected
    assert all(step == [name for name, _ in ranked[: len(step)]] for step in steps)


def test_sensitive_keeps_nodes_in_float_until_the_copy_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = spiked_model(tmp_path / "float.onnx")
    target = tmp_path / "int8.onnx"
    answers = iter([0.5, 0.97, 1.0])
    tried: list[set[str]] = []

    def compare(model: str, quantised: str, held_out: Any, measure: bool) -> dict:
        tried.append(float_nodes(Path(quantised)))
        return {"matched": next(answers)}

    monkeypatch.setattr(quantize_module, "compare", compare)
    sample = Sample(frames(), [], [])
    kept = quantize_module.to_int8(source, target, sample, "sensitive", "minmax", 0.95)
    assert kept == ["spike", "conv2", "conv1"]
    # None kept first, then all three; it stopped once 0.95 was met, with that copy written.
    assert tried == [set(), {"spike", "conv2", "conv1"}]
    assert float_nodes(target) == tried[-1]


def float_nodes(path: Path) -> set[str]:
    """Convolutions and products that take no dequantised input: the ones left in float."""
    graph = onnx.load(str(path)).graph
    dequantised = {o for n in graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    return {
        n.name
        for n in graph.node
        if n.op_type in ("Conv", "Mul") and not any(i in dequantised for i in n.input)
    }
