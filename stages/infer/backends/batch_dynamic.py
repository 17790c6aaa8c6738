"""Make a model exported with a fixed batch of 1 accept any batch, and prove it did no harm.

The rewrite: the first dimension of the graph's input and outputs becomes symbolic, and each
Reshape on the data path whose constant target shape starts with the batch of 1 gets 0 there
(ONNX: copy that dimension from the input). Reshapes of weights or quantisation scales are
left alone. The result is then checked once against the original on random input.

With ``spatial``, the input's height and width become symbolic too (for ``infer.rect``): a
graph that computes its shapes (YOLOX exports, Ultralytics ones made with ``dynamic=True``)
then runs on any multiple of the stride; one with the anchor count fixed in constants fails
:func:`spatial_problem`, which is asked before such a model is used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from onnx import GraphProto

log = logging.getLogger(__name__)

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
"""numpy dtypes of onnxruntime's input type names."""


@dataclass(frozen=True)
class Rewrite:
    model: bytes | None
    """The serialised batch-dynamic model, or None when it could not be made safely."""
    reason: str
    reshapes: int = 0
    reductions: int = 0
    """Reductions over the batch axis made per image."""


def make_batch_dynamic(path: str, spatial: bool = False) -> Rewrite:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    graph = model.graph
    initializer_names = {init.name for init in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializer_names]
    if len(inputs) != 1:
        return Rewrite(None, f"{len(inputs)} graph inputs (expected 1)")
    dims = inputs[0].type.tensor_type.shape.dim
    fixed_batch = bool(dims) and dims[0].dim_value == 1
    if spatial and len(dims) != 4:
        return Rewrite(None, f"the input has {len(dims)} dimensions, not batch, C, H, W")
    if not fixed_batch and not spatial:
        return Rewrite(None, "the input's first dimension is not a fixed 1")
    if spatial:
        for dim, name in zip(dims[2:], ("height", "width"), strict=True):
            dim.ClearField("dim_value")
            dim.dim_param = name
        for output in graph.output:  # anchor counts follow the input size
            for index, dim in enumerate(output.type.tensor_type.shape.dim[1:], 1):
                dim.ClearField("dim_value")
                dim.dim_param = f"{output.name}_{index}"
    del graph.value_info[:]  # stale fixed shapes; onnxruntime infers them again
    if not fixed_batch:
        return Rewrite(model.SerializeToString(), "ok")

    for value in (*inputs, *graph.output):
        declared = value.type.tensor_type.shape.dim
        if declared:  # an output may declare no shape at all; onnxruntime infers it
            declared[0].ClearField("dim_value")
            declared[0].dim_param = "batch"

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
    reductions = _per_image_reductions(graph, data_path, initializers, constants)
    _drop_unused(graph, set(initializers))
    return Rewrite(model.SerializeToString(), "ok", rewritten, reductions)


REDUCTIONS = {
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp",
}  # fmt: skip


def _per_image_reductions(
    graph: GraphProto, data_path: set[str], initializers: dict[str, Any], constants: dict[str, Any]
) -> int:
    """Reductions over axis 0 that keep their dimensions stop reducing over it, and one over
    axis 0 alone becomes an Identity; returns how many changed.

    An export made at batch 1 can normalise over "all axes" (TensorFlow's exports of layer
    norms: Intel's person re-identification model has 40 such ReduceMeans), which at batch 1
    is per image and at batch N would mix the images. Negative axes and ``keepdims = 0`` are
    left: the check against the original refuses the rewrite if they mattered."""
    from onnx import helper, numpy_helper

    changed = 0
    for node in graph.node:
        if node.op_type not in REDUCTIONS or node.input[0] not in data_path:
            continue
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attributes.get("keepdims", 1) != 1:
            continue
        from_input = len(node.input) > 1 and node.input[1] != ""
        if from_input:
            source = initializers.get(node.input[1])
            if source is None and node.input[1] in constants:
                source = constants[node.input[1]].attribute[0].t
            if source is None:
                continue
            axes = [int(a) for a in numpy_helper.to_array(source).reshape(-1)]
        elif "axes" in attributes:
            axes = [int(a) for a in attributes["axes"]]
        else:
            continue  # no axes: all of them, and how many is not known here
        if 0 not in axes:
            continue
        kept = [a for a in axes if a != 0]
        if not kept:
            node.op_type = "Identity"
            del node.input[1:]
            del node.attribute[:]
        elif from_input:
            name = f"{node.input[1]}__per_image_{changed}"
            graph.initializer.append(numpy_helper.from_array(np.array(kept, np.int64), name))
            node.input[1] = name
        else:
            for attribute in node.attribute:
                if attribute.name == "axes":
                    del attribute.ints[:]
                    attribute.ints.extend(kept)
        changed += 1
    return changed


def _drop_unused(graph: GraphProto, names: set[str]) -> None:
    """Initializers of ``names`` no node reads any more (the targets a rewrite replaced):
    onnxruntime warns of each one it finds."""
    read = {name for node in graph.node for name in node.input}
    read.update(output.name for output in graph.output)
    kept = [init for init in graph.initializer if init.name not in names or init.name in read]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


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


def spatial_problem(
    session: Any, input_name: str, shape: tuple[int, ...], dtype: np.dtype, stride: int = 32
) -> str | None:
    """Why ``session`` cannot run a wide input (one ``stride`` high: the cheapest probe), or
    None when it can and its output changes size with the input."""
    square = np.zeros((1, *shape[1:]), dtype)
    wide = np.zeros((1, shape[1], stride, shape[3]), dtype)
    try:
        whole = session.run(None, {input_name: square})[0]
        half = session.run(None, {input_name: wide})[0]
    except Exception as exc:  # onnxruntime raises its own error types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"its graph fixes the input size ({first[:160]})"
    if half.size >= whole.size:
        return "its output does not shrink with the input (anchors fixed in the graph)"
    return None


@dataclass(frozen=True)
class Chosen:
    """The model a backend runs after :func:`dynamic_model`, with what it became."""

    model: str | bytes
    cpu_session: Any
    batch_mode: str
    """``fixed``, ``frame-by-frame`` or ``dynamic (rewritten)``."""
    rect_problem: str | None = None
    """Why the model cannot take other input sizes, when they were asked for."""


def dynamic_model(
    path: str,
    original: Any,
    cpu_session: Callable[[str | bytes], Any],
    name: str,
    spatial: bool = False,
) -> Chosen:
    """The batch-dynamic (and with ``spatial``, size-dynamic) rewrite of ``path`` when it
    provably gives the same outputs, else ``path``; each with its CPU session."""
    first = original.get_inputs()[0]
    fixed_batch = first.shape[0] == 1
    rewrite = make_batch_dynamic(path, spatial=spatial)
    if rewrite.model is None:
        log.info("%s: model has a fixed batch of 1 (%s): running frame by frame", name,
                 rewrite.reason)  # fmt: skip
        return Chosen(path, original, "fixed", rewrite.reason if spatial else None)
    candidate = cpu_session(rewrite.model)
    dtype = np.dtype(DTYPES.get(first.type, np.float32))
    shape = tuple(first.shape)
    agree, worst = outputs_agree(original, candidate, first.name, shape, dtype)
    if not agree:
        log.info("%s: batch-dynamic rewrite changes outputs (relative difference %.2g): "
                 "running frame by frame", name, worst)  # fmt: skip
        return Chosen(path, original, "frame-by-frame", "the rewrite changes its outputs")
    problem = spatial_problem(candidate, first.name, shape, dtype) if spatial else None
    if problem and fixed_batch:
        return replace(dynamic_model(path, original, cpu_session, name), rect_problem=problem)
    if problem:
        return Chosen(path, original, "dynamic", problem)
    if fixed_batch:
        log.info("%s: made the batch dimension dynamic (%d Reshape constants, %d reductions "
                 "over the batch rewritten); verified against batch-1 outputs", name,
                 rewrite.reshapes, rewrite.reductions)  # fmt: skip
    if spatial:
        log.info("%s: the model takes any input size (rect)", name)
    return Chosen(rewrite.model, candidate, "dynamic (rewritten)" if fixed_batch else "dynamic")
