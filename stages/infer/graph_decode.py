"""YOLO head decode as ONNX nodes appended to the model, for ONNX Runtime's accelerators.

The raw head is 85 (YOLOX) or 84 (YOLOv8) numbers per anchor: 1.2 MB per frame for
YOLOX-Nano, 2.8 MB for YOLOv8n, copied back and decoded image by image in numpy. Appended to
the graph, the decode runs on the provider with the rest of the model (CUDA, ROCm, MIGraphX,
TensorRT, OpenVINO), with fixed shapes so compiling providers take it too, and six numbers
per anchor cross back: x1, y1, x2, y2, best class score, class id, in model-input pixels.
These are the candidates the numpy decoder gives (same arithmetic, in float32); the nms node
filters and suppresses them as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.infer.heads import Family, grid_cells, yolox_grid

if TYPE_CHECKING:
    from onnx import ModelProto

CANDIDATES = "vapipe_candidates"
"""The appended output: (batch, anchors, 6) float32."""
MIN_OPSET = 11  # GatherElements; Slice with tensor inputs
FAMILIES = (Family.YOLOX, Family.YOLOV5, Family.YOLOV8)
PREFIX = "vapipe_decode/"


@dataclass(frozen=True)
class HeadLayout:
    """What the appended decode needs to know about the model's head."""

    family: Family
    input_w: int
    input_h: int


def unsupported(model: ModelProto, layout: HeadLayout) -> str | None:
    """Why the decode cannot be appended to ``model`` (an onnx ModelProto), or None."""
    if layout.family not in FAMILIES:
        return f"{layout.family.value} heads are decoded in the model already"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        return f"the model's opset {opset} is older than {MIN_OPSET}"
    if len(model.graph.output) < 1:
        return "the model has no output"
    dims = model.graph.output[0].type.tensor_type.shape.dim
    anchors = dims[1].dim_value if len(dims) == 3 else 0
    cells = grid_cells(layout.input_w, layout.input_h)
    if layout.family is Family.YOLOX and anchors and anchors != cells:
        # The numpy decoder then says so, naming the input size, at the first batch.
        return f"its {anchors} anchors do not fit the {cells} cells of the input's grid"
    return None


def append_decode(model: ModelProto, layout: HeadLayout) -> ModelProto:
    """``model`` (an onnx ModelProto, changed in place and returned) with a second output,
    :data:`CANDIDATES`, decoded from its first. Call :func:`unsupported` first."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    nodes: list[onnx.NodeProto] = []
    constants: dict[str, onnx.TensorProto] = {}

    def const(name: str, value: np.ndarray) -> str:
        """An initializer, made once per name (ONNX requires names to be unique)."""
        if PREFIX + name not in constants:
            constants[PREFIX + name] = numpy_helper.from_array(value, PREFIX + name)
        return PREFIX + name

    def op(kind: str, inputs: Sequence[str], **attributes: Any) -> str:
        output = f"{PREFIX}{len(nodes)}_{kind}"
        nodes.append(helper.make_node(kind, list(inputs), [output], name=output, **attributes))
        return output

    def columns(data: str, start: int, end: int) -> str:
        """``data[:, :, start:end]``."""
        last = np.iinfo(np.int64).max if end < 0 else end
        return op(
            "Slice",
            [
                data,
                const(f"start{start}", np.array([start], np.int64)),
                const(f"end{end}", np.array([last], np.int64)),
                const("axis2", np.array([2], np.int64)),
            ],
        )

    head = op("Cast", [graph.output[0].name], to=TensorProto.FLOAT)
    family = layout.family
    if family is Family.YOLOV8:  # (B, 4 + classes, anchors) -> (B, anchors, 4 + classes)
        head = op("Transpose", [head], perm=[0, 2, 1])
    centre, size = columns(head, 0, 2), columns(head, 2, 4)
    if family is Family.YOLOX:
        grid, stride = yolox_grid(layout.input_w, layout.input_h)
        centre = op("Mul", [op("Add", [centre, const("grid", grid)]), const("stride", stride)])
        size = op("Mul", [op("Exp", [size]), const("stride", stride)])
    if family is Family.YOLOV8:
        scores = columns(head, 4, -1)
    else:
        scores = op("Mul", [columns(head, 4, 5), columns(head, 5, -1)])
    half = op("Div", [size, const("two", np.array(2.0, np.float32))])
    class_id = op("ArgMax", [scores], axis=2, keepdims=1)  # the first best, as numpy
    best = op("GatherElements", [scores, class_id], axis=2)
    rows = [
        op("Sub", [centre, half]),
        op("Add", [centre, half]),
        best,
        op("Cast", [class_id], to=TensorProto.FLOAT),
    ]
    nodes.append(helper.make_node("Concat", rows, [CANDIDATES], name=PREFIX + "rows", axis=2))
    batch = graph.output[0].type.tensor_type.shape.dim[0]
    graph.node.extend(nodes)
    graph.initializer.extend(constants.values())
    graph.output.append(
        helper.make_tensor_value_info(
            CANDIDATES,
            TensorProto.FLOAT,
            [batch.dim_param or batch.dim_value or "batch", None, 6],
        )
    )
    return model


def candidates_from_rows(rows: np.ndarray, names: Sequence[str]) -> list[Detections]:
    """Per-image candidates from :data:`CANDIDATES` rows, for the nms node."""
    return [
        Detections(
            xyxy=np.ascontiguousarray(image[:, :4]),
            score=np.ascontiguousarray(image[:, 4]),
            class_id=image[:, 5].astype(np.int32),
            names=names,
        )
        for image in rows
    ]
