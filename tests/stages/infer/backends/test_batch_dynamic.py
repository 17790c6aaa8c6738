"""The batch rewrite on small graphs built here, one rule each: which Reshapes it changes, what
it refuses and why, what ``spatial`` makes symbolic, and how a rewrite is proven (or refused)
against the batch-1 original before a backend runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vapipe.stages.infer.backends.batch_dynamic import (  # noqa: E402
    dynamic_model,
    make_batch_dynamic,
    outputs_agree,
    spatial_problem,
)

FLOAT = TensorProto.FLOAT


def save(
    tmp_path: Path, nodes: list, inputs: list, outputs: list, inits=(), name="m", opset=18
) -> str:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return str(path)


def value(name: str, dims: list, kind: int = FLOAT):  # type: ignore[no-untyped-def]
    return helper.make_tensor_value_info(name, kind, dims)


def ints(name: str, values: list[int]):  # type: ignore[no-untyped-def]
    return numpy_helper.from_array(np.array(values, np.int64), name)


def classifier(tmp_path: Path) -> str:
    """x [1,3,4,4] -> Reshape(initializer [1,48]) -> MatMul -> + bias reshaped from weights
    ([1,2], not on the data path) -> Reshape(Constant node [1,2,1]) -> y [1,2,1]."""
    rng = np.random.default_rng(0)
    weights = numpy_helper.from_array(rng.random((48, 2)).astype(np.float32), "w")
    bias = numpy_helper.from_array(np.array([0.5, -0.5], np.float32), "b")
    nodes = [
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["scores"]),
        helper.make_node("Reshape", ["b", "bias_shape"], ["bias_row"]),
        helper.make_node("Add", ["scores", "bias_row"], ["biased"]),
        helper.make_node("Constant", [], ["out_shape"], value=ints("v", [1, 2, 1])),
        helper.make_node("Reshape", ["biased", "out_shape"], ["y"]),
    ]
    inits = [weights, bias, ints("flat_shape", [1, 48]), ints("bias_shape", [1, 2])]
    return save(tmp_path, nodes, [value("x", [1, 3, 4, 4])], [value("y", [1, 2, 1])], inits)


def session(model: str | bytes) -> Any:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def test_reshapes_on_the_data_path_take_the_batch_from_their_input(tmp_path: Path) -> None:
    rewrite = make_batch_dynamic(classifier(tmp_path))
    assert rewrite.reason == "ok" and rewrite.reshapes == 2  # the initializer and the Constant
    model = onnx.load_from_string(rewrite.model)
    for graph_value in (model.graph.input[0], model.graph.output[0]):
        batch = graph_value.type.tensor_type.shape.dim[0]
        assert batch.dim_param == "batch" and not batch.HasField("dim_value")
    shapes = {i.name: numpy_helper.to_array(i).tolist() for i in model.graph.initializer}
    targets = {n.input[1] for n in model.graph.node if n.op_type == "Reshape"}
    assert sorted(shapes[t] for t in targets if t in shapes) == [[0, 2, 1], [0, 48], [1, 2]]
    assert "flat_shape" not in shapes  # the replaced target is dropped, unused
    images = np.random.default_rng(1).random((3, 3, 4, 4)).astype(np.float32)
    batched = session(rewrite.model).run(None, {"x": images})[0]
    original = session(classifier(tmp_path))
    singles = [original.run(None, {"x": images[i : i + 1]})[0][0] for i in range(3)]
    assert batched.shape == (3, 2, 1) and np.allclose(batched, singles, rtol=1e-5)


@pytest.mark.parametrize(
    ("shape", "note"),
    [([-1, 48], "the batch is inferred already"), ([48], "no batch"),
     ([2, 24], "not a batch of 1"), ([], "empty")],
)  # fmt: skip
def test_a_reshape_target_that_does_not_start_with_a_batch_of_1_is_left(
    tmp_path: Path, shape: list[int], note: str
) -> None:
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=0)]
    dims = [1, 48] if shape != [] else [1]
    path = save(tmp_path, nodes, [value("x", dims)], [value("y", None)], [ints("s", shape)])
    rewrite = make_batch_dynamic(path)
    assert rewrite.reason == "ok" and rewrite.reshapes == 0, note


def test_a_reshape_to_a_two_dimensional_target_is_left(tmp_path: Path) -> None:
    target = numpy_helper.from_array(np.array([[1, 48]], np.int64), "s")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "m", [value("x", [1, 48])], [value("y", None)], [target])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert make_batch_dynamic(str(tmp_path / "m.onnx")).reshapes == 0


def test_a_shape_computed_from_the_input_already_follows_the_batch(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["dims"], end=1),
        helper.make_node("Concat", ["dims", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Constant", [], ["two"], value=ints("v", [1, 2, 24])),
        helper.make_node("Reshape", ["flat", "two"], ["y"]),
    ]
    path = save(tmp_path, nodes, [value("x", [1, 3, 4, 4])], [value("y", [1, 2, 24])],
                [ints("rest", [-1])])  # fmt: skip
    rewrite = make_batch_dynamic(path)
    assert rewrite.reshapes == 1  # only the Constant's, after the computed one
    out = session(rewrite.model).run(None, {"x": np.zeros((2, 3, 4, 4), np.float32)})[0]
    assert out.shape == (2, 2, 24)


def test_an_old_export_listing_its_weights_as_inputs_has_one_input(tmp_path: Path) -> None:
    weights = numpy_helper.from_array(np.ones((48, 2), np.float32), "w")
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["y"]),
    ]
    path = save(tmp_path, nodes, [value("x", [1, 48]), value("w", [48, 2])],
                [value("y", [1, 2])], [weights, ints("s", [1, 48])])  # fmt: skip
    assert make_batch_dynamic(path).reshapes == 1


@pytest.mark.parametrize(
    ("inputs", "reason"),
    [
        ([value("a", [1, 2]), value("b", [1, 2])], "2 graph inputs (expected 1)"),
        ([value("a", [2, 2])], "the input's first dimension is not a fixed 1"),
        ([value("a", ["n", 2])], "the input's first dimension is not a fixed 1"),
        ([value("a", [])], "the input's first dimension is not a fixed 1"),
    ],
)
def test_what_cannot_be_rewritten_says_why(tmp_path: Path, inputs: list, reason: str) -> None:
    nodes = [helper.make_node("Identity", [inputs[0].name], ["y"])]
    rewrite = make_batch_dynamic(save(tmp_path, nodes, inputs, [value("y", None)]))
    assert (rewrite.model, rewrite.reason) == (None, reason)


def test_no_input_at_all_says_so(tmp_path: Path) -> None:
    nodes = [helper.make_node("Constant", [], ["y"], value=ints("v", [1]))]
    rewrite = make_batch_dynamic(save(tmp_path, nodes, [], [value("y", None, TensorProto.INT64)]))
    assert (rewrite.model, rewrite.reason) == (None, "0 graph inputs (expected 1)")


def conv_like(tmp_path: Path, batch: int | str = 1, name: str = "conv") -> str:
    """x [B,3,64,64] -> ReduceMean over channels -> y [B,1,64,64]: its output follows the
    size (the probe, 32 rows high, is half of it)."""
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)]
    return save(tmp_path, nodes, [value("x", [batch, 3, 64, 64])],
                [value("y", [batch, 1, 64, 64])],
                [ints("axes", [1])], name=name)  # fmt: skip


def test_spatial_makes_height_width_and_output_sizes_symbolic(tmp_path: Path) -> None:
    model = onnx.load_from_string(make_batch_dynamic(conv_like(tmp_path), spatial=True).model)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [(d.dim_param, d.dim_value) for d in dims] == [
        ("batch", 0), ("", 3), ("height", 0), ("width", 0),
    ]  # fmt: skip
    out = model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in out] == ["batch", "y_1", "y_2", "y_3"]
    got = session(model.SerializeToString()).run(None, {"x": np.ones((2, 3, 32, 64), np.float32)})
    assert got[0].shape == (2, 1, 32, 64)
    plain = onnx.load_from_string(make_batch_dynamic(conv_like(tmp_path)).model)
    assert [d.dim_value for d in plain.graph.input[0].type.tensor_type.shape.dim] == [0, 3, 64, 64]


def test_spatial_on_a_dynamic_batch_keeps_it_and_rewrites_no_reshape(tmp_path: Path) -> None:
    rewrite = make_batch_dynamic(conv_like(tmp_path, batch="n"), spatial=True)
    assert (rewrite.reason, rewrite.reshapes) == ("ok", 0)
    dims = onnx.load_from_string(rewrite.model).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["n", "", "height", "width"]


@pytest.mark.parametrize("dims", [[1, 3, 8], [1, 3, 8, 8, 1]])
def test_spatial_needs_batch_channels_height_width(tmp_path: Path, dims: list[int]) -> None:
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    path = save(tmp_path, nodes, [value("x", dims)], [value("y", dims)])
    assert make_batch_dynamic(path, spatial=True).reason == (
        f"the input has {len(dims)} dimensions, not batch, C, H, W"
    )
    assert make_batch_dynamic(path).reason == "ok"  # without spatial: any rank


def test_stale_value_info_shapes_are_dropped(tmp_path: Path) -> None:
    path = classifier(tmp_path)
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    assert len(model.graph.value_info) > 0
    onnx.save(model, path)
    assert len(onnx.load_from_string(make_batch_dynamic(path).model).graph.value_info) == 0


class Recorded:
    """A session that records its inputs and gives what ``answer`` makes of them."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.answer, self.seen = answer, []

    def run(self, names, feed):  # type: ignore[no-untyped-def]
        [array] = feed.values()
        self.seen.append(array.shape)
        return self.answer(array)


def test_spatial_problem_probes_a_square_and_one_stride_high(tmp_path: Path) -> None:
    follows = Recorded(lambda a: [a[:, :1]])
    assert spatial_problem(follows, "x", (1, 3, 640, 480), np.dtype(np.float32)) is None
    assert follows.seen == [(1, 3, 640, 480), (1, 3, 32, 480)]
    fixed = Recorded(lambda a: [np.zeros((1, 8400, 85))])
    assert spatial_problem(fixed, "x", (1, 3, 640, 640), np.dtype(np.float32)) == (
        "its output does not shrink with the input (anchors fixed in the graph)"
    )
    grows = Recorded(lambda a: [np.zeros(a.shape[2] * a.shape[3] + (a.shape[2] < 640) * 10**7)])
    assert spatial_problem(grows, "x", (1, 3, 640, 640), np.dtype(np.float32)) is not None


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        ("Got invalid dimensions\nindex: 2 Got: 32 Expected: 640", "Got invalid dimensions"),
        ("", "RuntimeError"),
        ("x" * 200, "x" * 160),
    ],
)
def test_a_session_that_refuses_the_probe_is_named_by_its_first_line(
    error: str, shown: str
) -> None:
    def refuses(array):  # type: ignore[no-untyped-def]
        if array.shape[2] != 640:
            raise RuntimeError(error)
        return [array]

    assert spatial_problem(Recorded(refuses), "x", (1, 3, 640, 640), np.dtype(np.float32)) == (
        f"its graph fixes the input size ({shown})"
    )


def test_a_real_graph_with_its_size_fixed_fails_the_probe(tmp_path: Path) -> None:
    rewrite = make_batch_dynamic(classifier(tmp_path), spatial=True)
    problem = spatial_problem(session(rewrite.model), "x", (1, 3, 4, 4), np.dtype(np.float32), 2)
    assert problem is not None and problem.startswith("its graph fixes the input size (")


def test_outputs_agree_image_by_image_and_not_across_the_batch(tmp_path: Path) -> None:
    original = session(classifier(tmp_path))
    rewritten = session(make_batch_dynamic(classifier(tmp_path)).model)
    agree, worst = outputs_agree(original, rewritten, "x", (1, 3, 4, 4), np.dtype(np.float32))
    assert agree and worst <= 1e-6
    off = Recorded(lambda a: [rewritten.run(None, {"x": a})[0] * 1.001])
    agree, worst = outputs_agree(original, off, "x", (1, 3, 4, 4), np.dtype(np.float32))
    assert not agree and 5e-4 < worst < 2e-3
    merged = Recorded(lambda a: [rewritten.run(None, {"x": a})[0].sum(0, keepdims=True)])
    assert outputs_agree(original, merged, "x", (1, 3, 4, 4), np.dtype(np.float32)) == (
        False, float("inf"),
    )  # fmt: skip
    assert off.seen == [(3, 3, 4, 4)]  # one batch of 3


def test_a_rewrite_that_holds_is_run_batched(tmp_path: Path) -> None:
    path = classifier(tmp_path)
    chosen = dynamic_model(path, session(path), session, "det")
    assert chosen.batch_mode == "dynamic (rewritten)" and isinstance(chosen.model, bytes)
    assert chosen.rect_problem is None
    assert chosen.cpu_session.run(None, {"x": np.zeros((4, 3, 4, 4), np.float32)})[0].shape[0] == 4


def test_a_model_that_cannot_be_rewritten_runs_as_it_is(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    path = save(tmp_path, nodes, [value("a", [1, 3, 8, 8]), value("b", [1, 3, 8, 8])],
                [value("y", [1, 3, 8, 8])])  # fmt: skip
    original = session(path)
    plain = dynamic_model(path, original, session, "det")
    assert (plain.model, plain.cpu_session, plain.batch_mode, plain.rect_problem) == (
        path, original, "fixed", None,
    )  # fmt: skip
    rect = dynamic_model(path, original, session, "det", spatial=True)
    assert rect.rect_problem == "2 graph inputs (expected 1)"


def test_a_rewrite_that_changes_outputs_is_refused(tmp_path: Path) -> None:
    # A sum over the batch that a transpose moved to axis 1: nothing the rewrite can see.
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2, 3]),
        helper.make_node("ReduceSum", ["t", "axes"], ["s"], keepdims=1),
        helper.make_node("Transpose", ["s"], ["y"], perm=[1, 0, 2, 3]),
    ]
    path = save(tmp_path, nodes, [value("x", [1, 3, 4, 4])], [value("y", [1, 3, 4, 4])],
                [ints("axes", [1])])  # fmt: skip
    original = session(path)
    chosen = dynamic_model(path, original, session, "det")
    assert (chosen.model, chosen.cpu_session, chosen.batch_mode) == (
        path,
        original,
        "frame-by-frame",
    )
    assert chosen.rect_problem == "the rewrite changes its outputs"


def test_half_precision_models_are_checked_with_half_inputs(tmp_path: Path) -> None:
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)]
    path = save(tmp_path, nodes, [value("x", [1, 3, 64, 64], TensorProto.FLOAT16)],
                [value("y", [1, 1, 64, 64], TensorProto.FLOAT16)], [ints("axes", [1])])  # fmt: skip
    chosen = dynamic_model(path, session(path), session, "det", spatial=True)
    assert (chosen.batch_mode, chosen.rect_problem) == ("dynamic (rewritten)", None)


def test_rect_on_a_graph_with_its_size_fixed_keeps_the_batch_rewrite(tmp_path: Path) -> None:
    path = classifier(tmp_path)
    chosen = dynamic_model(path, session(path), session, "det", spatial=True)
    assert chosen.batch_mode == "dynamic (rewritten)" and isinstance(chosen.model, bytes)
    assert chosen.rect_problem is not None
    assert chosen.rect_problem.startswith("its graph fixes the input size (")
    dims = onnx.load_from_string(chosen.model).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [0, 3, 4, 4]  # the batch only: sizes stay fixed


def test_rect_on_a_dynamic_batch_model_with_fixed_anchors_keeps_the_file(tmp_path: Path) -> None:
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["y"])]  # the same size at any input
    path = save(tmp_path, nodes, [value("x", ["n", 3, 64, 64])], [value("y", ["n", 3, 1, 1])])
    original = session(path)
    chosen = dynamic_model(path, original, session, "det", spatial=True)
    assert (chosen.model, chosen.batch_mode) == (path, "dynamic")
    assert chosen.rect_problem == (
        "its output does not shrink with the input (anchors fixed in the graph)"
    )


def test_rect_on_a_model_that_follows_the_size(tmp_path: Path) -> None:
    dynamic = dynamic_model(conv_like(tmp_path, "n"), session(conv_like(tmp_path, "n")), session,
                            "det", spatial=True)  # fmt: skip
    assert (dynamic.batch_mode, dynamic.rect_problem) == ("dynamic", None)
    assert isinstance(dynamic.model, bytes)
    fixed = dynamic_model(conv_like(tmp_path), session(conv_like(tmp_path)), session, "det",
                          spatial=True)  # fmt: skip
    assert (fixed.batch_mode, fixed.rect_problem) == ("dynamic (rewritten)", None)


@pytest.mark.parametrize(("dtype", "top"), [(np.float32, 255), (np.float16, 1)])
def test_the_agreement_is_checked_on_images_over_the_inputs_range(dtype: type, top: int) -> None:
    # Pixels 0-255 for a float model (what preprocessing hands it); 0-1 for a half one.
    seen: list[np.ndarray] = []

    def keep(array: np.ndarray) -> list[np.ndarray]:
        seen.append(array)
        return [array.astype(np.float32).sum(axis=(1, 2, 3), keepdims=True)]

    agree, _ = outputs_agree(Recorded(keep), Recorded(keep), "x", (1, 3, 8, 8), np.dtype(dtype))
    assert agree and seen[0].shape == (3, 3, 8, 8)
    assert all(array.dtype == dtype for array in seen)
    assert seen[0].min() >= 0 and 0.9 * top < seen[0].max() <= top


def shaped(rows: int, *rest: int):  # type: ignore[no-untyped-def]
    """A session answering zeros of (``rows`` or the batch's size, *rest)."""
    return Recorded(lambda a: [np.zeros((rows or a.shape[0], *rest), np.float32)])


@pytest.mark.parametrize(
    "dynamic",
    [shaped(4, 2, 1), shaped(1, 2, 1), shaped(0, 2, 2), shaped(0, 1, 1), shaped(0, 2)],
    ids=["a-row-too-many", "one-row", "wider", "narrower", "fewer-dimensions"],
)
def test_a_batched_output_of_another_shape_never_agrees(dynamic: Recorded) -> None:
    single = shaped(0, 2, 1)
    assert outputs_agree(single, dynamic, "x", (1, 3, 4, 4), np.dtype(np.float32)) == (
        False, float("inf"),
    )  # fmt: skip


def test_the_difference_is_relative_to_the_largest_output_or_absolute_at_zero() -> None:
    def answer(values: list[float]):  # type: ignore[no-untyped-def]
        return Recorded(lambda a: [np.tile(np.array(values, np.float64), (a.shape[0], 1))])

    # Outputs all zero: the difference itself, not divided by zero.
    assert outputs_agree(answer([0, 0]), answer([0, 5e-5]), "x", (1, 2), np.dtype(np.float32)) == (
        True, pytest.approx(5e-5),
    )  # fmt: skip
    # Exactly 1e-4 of the largest output agrees; more does not.
    agree, worst = outputs_agree(answer([1, 0]), answer([1, 1e-4]), "x", (1, 2), np.dtype("f4"))
    assert agree and worst == 1e-4
    assert not outputs_agree(answer([2, 0]), answer([2, 3e-4]), "x", (1, 2), np.dtype("f4"))[0]


def test_a_reshape_left_does_not_stop_the_next_being_rewritten(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Reshape", ["x", "inferred"], ["flat"]),
        helper.make_node("Reshape", ["flat", "fixed"], ["y"]),
    ]
    path = save(tmp_path, nodes, [value("x", [1, 48])], [value("y", [1, 2, 24])],
                [ints("inferred", [-1, 48]), ints("fixed", [1, 2, 24])])  # fmt: skip
    rewrite = make_batch_dynamic(path)
    assert rewrite.reshapes == 1
    out = session(rewrite.model).run(None, {"x": np.zeros((3, 48), np.float32)})[0]
    assert out.shape == (3, 2, 24)


def test_a_target_computed_by_another_node_is_not_read_as_a_constant(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["dims"]),
        helper.make_node("Reshape", ["x", "dims"], ["y"]),
    ]
    path = save(tmp_path, nodes, [value("x", [1, 48])], [value("y", [1, 48])])
    assert make_batch_dynamic(path).reshapes == 0


def test_the_size_probe_reads_the_first_output() -> None:
    # The detections come first; a second output of fixed size (a mask, anchors) is not it.
    both = Recorded(lambda a: [a[:, :1], np.zeros((1, 100))])
    assert spatial_problem(both, "x", (1, 3, 64, 64), np.dtype(np.float32)) is None
    first_fixed = Recorded(lambda a: [np.zeros((1, 100)), a[:, :1]])
    assert spatial_problem(first_fixed, "x", (1, 3, 64, 64), np.dtype(np.float32)) is not None


def test_what_was_chosen_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO"):
        dynamic_model(classifier(tmp_path), session(classifier(tmp_path)), session, "det")
    assert (
        "det: made the batch dimension dynamic (2 Reshape constants, 0 reductions over the "
        "batch rewritten)" in caplog.text
    )
    assert "takes any input size" not in caplog.text
    caplog.clear()
    path = conv_like(tmp_path, "n")
    with caplog.at_level("INFO"):
        dynamic_model(path, session(path), session, "det", spatial=True)
    assert "det: the model takes any input size (rect)" in caplog.text
    assert "made the batch dimension dynamic" not in caplog.text


def test_what_a_rewrite_chose_cannot_be_changed_afterwards(tmp_path: Path) -> None:
    from dataclasses import FrozenInstanceError

    path = classifier(tmp_path)
    rewrite = make_batch_dynamic(path)
    chosen = dynamic_model(path, session(path), session, "det")
    with pytest.raises(FrozenInstanceError):
        rewrite.reshapes = 0  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        chosen.batch_mode = "fixed"  # type: ignore[misc]


def normaliser(tmp_path: Path, axes: list[int], keepdims: int = 1, opset: int = 18) -> str:
    """x [1,3,4,4] -> x - ReduceMean(x, axes) -> y: TensorFlow's exports of a layer norm
    reduce over every axis, the batch's included (at batch 1, per image). Opset 18 takes the
    axes as an input, opset 13 as an attribute."""
    if opset >= 18:
        mean = helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=keepdims)
        inits = [ints("axes", axes)]
    else:
        mean = helper.make_node("ReduceMean", ["x"], ["mean"], axes=axes, keepdims=keepdims)
        inits = []
    nodes = [mean, helper.make_node("Sub", ["x", "mean"], ["y"])]
    shape = [1, 3, 4, 4]
    return save(
        tmp_path, nodes, [value("x", shape)], [value("y", shape)], inits, f"n{opset}", opset
    )


@pytest.mark.parametrize("opset", [13, 18])
def test_a_reduction_over_the_batch_becomes_per_image(tmp_path: Path, opset: int) -> None:
    path = normaliser(tmp_path, [0, 1, 2, 3], opset=opset)
    rewrite = make_batch_dynamic(path)
    assert rewrite.reductions == 1
    original, rewritten = session(path), session(rewrite.model)
    assert outputs_agree(original, rewritten, "x", (1, 3, 4, 4), np.dtype(np.float32))[0]
    chosen = dynamic_model(path, original, session, "reid")
    assert chosen.batch_mode == "dynamic (rewritten)"
    # Batched, each image is normalised by its own mean: image 1 of a pair whose image 0 is
    # all zeros gives what it gives alone.
    pair = np.random.default_rng(1).random((2, 3, 4, 4)).astype(np.float32)
    pair[0] = 0
    alone = original.run(None, {"x": pair[1:]})[0]
    np.testing.assert_allclose(rewritten.run(None, {"x": pair})[0][1], alone[0], atol=1e-6)


@pytest.mark.parametrize("opset", [13, 18])
def test_a_reduction_over_the_batch_alone_becomes_an_identity(tmp_path: Path, opset: int) -> None:
    rewrite = make_batch_dynamic(normaliser(tmp_path, [0], opset=opset))
    model = onnx.load_from_string(rewrite.model)
    assert [node.op_type for node in model.graph.node] == ["Identity", "Sub"]
    assert list(model.graph.node[0].input) == ["x"] and not model.graph.initializer


def test_reductions_that_keep_the_batch_are_left(tmp_path: Path) -> None:
    path = normaliser(tmp_path, [1, 2, 3])
    rewrite = make_batch_dynamic(path)
    assert rewrite.reductions == 0
    model = onnx.load_from_string(rewrite.model)
    assert numpy_helper.to_array(model.graph.initializer[0]).tolist() == [1, 2, 3]


def test_a_reduction_that_drops_the_batch_axis_is_refused_by_the_check(tmp_path: Path) -> None:
    path = save(
        tmp_path,
        [
            helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=0),
            helper.make_node("Sub", ["x", "mean"], ["y"]),
        ],
        [value("x", [1, 3, 4, 4])],
        [value("y", [1, 3, 4, 4])],
        [ints("axes", [0])],
    )
    assert make_batch_dynamic(path).reductions == 0
    assert dynamic_model(path, session(path), session, "reid").batch_mode != "dynamic (rewritten)"


def reductions_graph(tmp_path: Path, nodes: list, inits: list, opset: int = 18) -> str:
    """x [1,3,4,4] -> the nodes -> y [1,3,4,4] (each test's nodes end in y)."""
    shape = [1, 3, 4, 4]
    return save(tmp_path, nodes, [value("x", shape)], [value("y", shape)], inits, "r", opset)


def test_negative_axes_stay_and_axes_computed_by_a_node_are_left(tmp_path: Path) -> None:
    # [0, -1] loses only the batch; axes that a node computes are not read (nor guessed).
    path = reductions_graph(
        tmp_path,
        [
            helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
            helper.make_node("Identity", ["other_axes"], ["computed"]),
            helper.make_node("ReduceMax", ["x", "computed"], ["n"], keepdims=1),
            helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Sub", ["d", "n"], ["y"]),
        ],
        [ints("axes", [0, -1]), ints("other_axes", [0])],
    )
    rewrite = make_batch_dynamic(path)
    assert rewrite.reductions == 1
    model = onnx.load_from_string(rewrite.model)
    mean = next(n for n in model.graph.node if n.op_type == "ReduceMean")
    axes = {i.name: numpy_helper.to_array(i).tolist() for i in model.graph.initializer}
    assert axes[mean.input[1]] == [-1]


def test_a_reduction_without_axes_does_not_stop_the_next_being_rewritten(tmp_path: Path) -> None:
    path = reductions_graph(
        tmp_path,
        [
            helper.make_node("ReduceMean", ["x"], ["everything"], keepdims=1),  # all axes
            helper.make_node("ReduceMean", ["x"], ["m"], axes=[0, 1, 2, 3], keepdims=1),
            helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Sub", ["d", "everything"], ["y"]),
        ],
        [],
        opset=13,
    )
    rewrite = make_batch_dynamic(path)
    assert rewrite.reductions == 1
    model = onnx.load_from_string(rewrite.model)
    kept = [helper.get_attribute_value(a) for n in model.graph.node for a in n.attribute
            if a.name == "axes"]  # fmt: skip
    assert kept == [[1, 2, 3]]
