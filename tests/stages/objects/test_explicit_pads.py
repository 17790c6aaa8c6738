"""SAME padding written out as explicit pads (PaddleOCR's exports): the same outputs in ONNX
Runtime, and a model onnx2torch (the torch backend) converts."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from vapipe.stages.objects.model import explicit_pads


def model(auto_pad: str, stride: int, size: tuple[int, int], pool: bool = False) -> onnx.ModelProto:
    weight = numpy_helper.from_array(
        np.random.default_rng(0).normal(size=(2, 3, 3, 4)).astype(np.float32), "w"
    )
    if pool:
        node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2],
                                strides=[stride, stride], auto_pad=auto_pad)  # fmt: skip
    else:
        node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride],
                                auto_pad=auto_pad)  # fmt: skip
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, *size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[] if pool else [weight],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("pool", [False, True])
def test_the_same_outputs_with_explicit_pads(auto_pad: str, stride: int, pool: bool) -> None:
    x = np.random.default_rng(1).normal(size=(1, 3, 13, 10)).astype(np.float32)
    same = model(auto_pad, stride, (13, 10), pool)
    written = model(auto_pad, stride, (13, 10), pool)
    assert explicit_pads(written) == 1
    (attrs,) = [{a.name for a in node.attribute} for node in written.graph.node]
    assert "auto_pad" not in attrs and "pads" in attrs
    np.testing.assert_allclose(run(written, x), run(same, x), rtol=1e-6, atol=1e-6)


def test_upper_and_lower_put_the_odd_pixel_at_opposite_ends() -> None:
    upper, lower = model("SAME_UPPER", 1, (8, 8)), model("SAME_LOWER", 1, (8, 8))
    explicit_pads(upper), explicit_pads(lower)
    pads = [next(list(a.ints) for a in m.graph.node[0].attribute if a.name == "pads")
            for m in (upper, lower)]  # fmt: skip
    # kernel 3 x 4: 2 rows (1 + 1) and 3 columns: upper 1 + 2, lower 2 + 1.
    assert pads == [[1, 1, 1, 2], [1, 2, 1, 1]]


def test_without_known_shapes_or_same_padding_nothing_changes() -> None:
    assert explicit_pads(model("NOTSET", 1, (8, 8))) == 0
    unknown = model("SAME_UPPER", 2, (8, 8))
    unknown.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    assert explicit_pads(unknown) == 0
    assert any(a.name == "auto_pad" for a in unknown.graph.node[0].attribute)


def test_onnx2torch_converts_it_after() -> None:
    torch = pytest.importorskip("torch")
    convert = pytest.importorskip("onnx2torch").convert
    written = model("SAME_UPPER", 2, (13, 10))
    explicit_pads(written)
    x = np.random.default_rng(2).normal(size=(1, 3, 13, 10)).astype(np.float32)
    with torch.no_grad():
        out = convert(written).eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, run(written, x), rtol=1e-5, atol=1e-5)
