"""SiLU fused in onnx2torch's module: only ``x * sigmoid(x)`` of the same ``x`` becomes one
``silu``, and the model computes what it computed before."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import asset

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnx2torch = pytest.importorskip("onnx2torch")

from onnx import TensorProto, helper  # noqa: E402

from vapipe.stages.infer.backends.fx_rewrites import fuse_silu  # noqa: E402


def converted(nodes: list, outputs: list[str]):  # type: ignore[no-untyped-def]
    """onnx2torch's module of a graph over inputs x and y (1, 4) float."""
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in outputs],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx2torch.convert(model)


def ops(module) -> list[str]:  # type: ignore[no-untyped-def]
    names = []
    for node in module.graph.nodes:
        if node.op == "call_module":
            names.append(type(module.get_submodule(node.target)).__name__)
        elif node.op == "call_function":
            names.append(node.target.__name__)
    return names


X = torch.tensor([[-3.0, -0.5, 0.25, 4.0]])
Y = torch.tensor([[1.5, -2.0, 3.0, 0.5]])


@pytest.mark.parametrize("order", [["x", "s"], ["s", "x"]])
def test_x_times_its_sigmoid_becomes_one_silu_in_either_order(order: list[str]) -> None:
    module = converted(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", order, ["out"])],
        ["out"],
    )
    expected = module(X, Y)
    assert fuse_silu(module) == 1
    assert ops(module) == ["silu"] and "silu" in module.code  # the forward it runs
    assert torch.allclose(module(X, Y), expected, rtol=1e-6, atol=0)
    assert fuse_silu(module) == 0  # a second pass finds nothing more


def test_other_products_and_a_sigmoid_read_elsewhere_stay() -> None:
    module = converted(
        [
            helper.make_node("Sigmoid", ["x"], ["s"]),
            helper.make_node("Mul", ["y", "s"], ["other"]),  # another operand: not SiLU
            helper.make_node("Mul", ["s", "s"], ["square"]),  # sigmoid squared: not SiLU
            helper.make_node("Add", ["x", "s"], ["sum"]),  # not a product
            helper.make_node("Mul", ["x", "s"], ["silu"]),
        ],
        ["other", "square", "sum", "silu"],
    )
    expected = module(X, Y)
    assert fuse_silu(module) == 1
    assert sorted(ops(module)) == sorted(["Sigmoid", "silu"] + ["OnnxBinaryMathOperation"] * 3)
    for got, want in zip(module(X, Y), expected, strict=True):
        assert torch.allclose(got, want, rtol=1e-6, atol=0)


def test_a_graph_without_silu_is_left_as_it_was() -> None:
    module = converted([helper.make_node("Sigmoid", ["x"], ["out"])], ["out"])
    code = module.code
    assert fuse_silu(module) == 0
    assert module.code == code


def test_yolox_nano_fused_gives_the_same_output() -> None:
    model = onnx.load(asset("models", "yolox_nano.onnx"))
    plain, fused = onnx2torch.convert(model).eval(), onnx2torch.convert(model).eval()
    assert fuse_silu(fused) == 104
    # The six left are the objectness and class scores: sigmoids multiplied by nothing.
    assert ops(fused).count("Sigmoid") == 6 and ops(fused).count("silu") == 104
    batch = torch.from_numpy(np.random.default_rng(4).random((1, 3, 416, 416), np.float32) * 255)
    with torch.inference_mode():
        want, got = plain(batch), fused(batch)
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()


@pytest.mark.parametrize(("broadcast", "fused"), [(1, 0), (0, 1)])
def test_an_old_style_axis_broadcast_product_stays(broadcast: int, fused: int) -> None:
    """ONNX before opset 7 broadcast Mul's second operand along ``axis`` when ``broadcast``
    is 1: not a plain product then; with ``broadcast = 0`` the axis means nothing."""
    graph = helper.make_graph(
        [
            helper.make_node("Sigmoid", ["x"], ["s"]),
            helper.make_node("Mul", ["x", "s"], ["out"], broadcast=broadcast, axis=0),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4])],
    )
    module = onnx2torch.convert(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    )
    assert fuse_silu(module) == fused
    assert ops(module) == (["silu"] if fused else ["Sigmoid", "OnnxBinaryMathOperation"])
