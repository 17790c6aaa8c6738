"""Make a model exported with a fixed batch of 1 accept any batch, and prove it did no harm.

The rewrite: the first dimension of the graph's input and outputs becomes symbolic, and each
Reshape on the data path whose constant target shape starts with the batch of 1 gets 0 there
(ONNX: copy that dimension from the input). Reshapes of weights or quantisation scales are
left alone. The result is then checked once against the original on random input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from onnx import GraphProto


@dataclass(frozen=True)
class Rewrite:
    model: bytes | None
    """The serialised batch-dynamic model, or None when it could not be made safely."""
    reason: str
    reshapes: int = 0


def make_batch_dynamic(path: str) -> Rewrite:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    graph = model.graph
    initializer_names = {init.name for init in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializer_names]
    if len(inputs) != 1:
        return Rewrite(None, f"{len(inputs)} graph inputs (expected 1)")
    dims = inputs[0].type.tensor_type.shape.dim
    if not dims or dims[0].dim_value != 1:
        return Rewrite(None, "the input's first dimension is not a fixed 1")

    for value in (*inputs, *graph.output):
        value.type.tensor_type.shape.dim[0].ClearField("dim_value")
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    del graph.value_info[:]  # stale fixed shapes; onnxruntime infers them again

    data_path = _reachable_from(graph, inputs[0].name)
    initializers = {init.name: init for init in graph.initializer}
    constants = {node.output[0]: node for node in graph.node if node.op_type == "Constant"}
    rewritten = 0
    for node in graph.node:
        if node.op_type != "Reshape" or node.input[0] not in data_path:
            continue
        shape_name = node.input[1]
        if shape_name in initializers:
            shape = numpy_helper.to_array(initializers[shape_name])
        elif shape_name in constants:
            shape = numpy_helper.to_array(constants[shape_name].attribute[0].t)
        else:
            continue  # computed from Shape(): already follows the batch
        if shape.ndim != 1 or shape.size == 0 or shape[0] != 1:
            continue
        fixed = shape.copy()
        fixed[0] = 0
        new_name = f"{shape_name}__batch_{rewritten}"
        graph.initializer.append(numpy_helper.from_array(fixed.astype(np.int64), new_name))
        node.input[1] = new_name
        rewritten += 1
    return Rewrite(model.SerializeToString(), "ok", rewritten)


def _reachable_from(graph: GraphProto, start: str) -> set[str]:
    """Tensor names computed from ``start``."""
    reached = {start}
    changed = True
    nodes = list(graph.node)
    while changed:
        changed = False
        for node in nodes:
            if any(name in reached for name in node.input) and not set(node.output) <= reached:
                reached.update(node.output)
                changed = True
    return reached


def outputs_agree(
    original: Any,
    dynamic: Any,
    input_name: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    batch: int = 3,
    seed: int = 0,
) -> tuple[bool, float]:
    """Run ``batch`` random images through both sessions: the batched output of ``dynamic``
    must match ``original`` image by image. Returns (agree, worst relative difference)."""
    rng = np.random.default_rng(seed)
    images = (rng.random((batch, *shape[1:])) * (255 if dtype != np.float16 else 1)).astype(dtype)
    batched = dynamic.run(None, {input_name: images})
    worst = 0.0
    for index in range(batch):
        single = original.run(None, {input_name: images[index : index + 1]})
        for expected, got in zip(single, batched, strict=True):
            if got.shape[0] != batch or got.shape[1:] != expected.shape[1:]:
                return False, float("inf")
            scale = float(np.abs(expected).max()) or 1.0
            worst = max(worst, float(np.abs(got[index] - expected[0]).max()) / scale)
    return worst <= 1e-4, worst
