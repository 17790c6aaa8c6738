"""A model run on object crops: its file made ready for the backends (one output, a fixed
input size), its input conventions, and one batched call for any number of crops.

The backends run a model's first output. A model with several outputs that belong together
(YuNet: cls, obj, bbox and kps per stride; UltraFace: scores and boxes) gets them joined into
one tensor by a Concat appended to its graph, so every backend (ONNX Runtime's providers,
torch) runs it unchanged, batched as the detector is.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vapipe.pipeline.assets import model_entry, resolve_model
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.crops.warp import Normalise
from vapipe.stages.infer.backends import load_backend
from vapipe.stages.infer.backends.base import Backend
from vapipe.stages.objects.config import ObjectModelConfig
from vapipe.stages.objects.outputs import head_of
from vapipe.stages.onnx_file import check_onnx

log = logging.getLogger(__name__)

JOINED = "vapipe_joined"
"""The name of the one output a joined model gets."""
JOINS: dict[str, list[list[str]]] = {
    # per stride: score parts, box, landmarks -> (B, anchors of that stride, 16); then strides
    "yunet": [
        [f"{part}_{stride}" for part in ("cls", "obj", "bbox", "kps")] for stride in (8, 16, 32)
    ],
    "ultraface": [["scores", "boxes"]],
}
"""Heads whose outputs are joined: groups concatenated on the last axis, then the groups on
the anchor axis."""


@dataclass(frozen=True)
class Prepared:
    """The file a backend loads, and what was done to it."""

    path: str
    joined: str | None
    """The head whose outputs were joined, if any."""
    input_shape: tuple[int, ...]
    """The input's shape without the batch (C, H, W or H, W, C)."""


def output_names(path: str) -> list[str]:
    import onnx

    return [output.name for output in onnx.load(path, load_external_data=False).graph.output]


def prepare(path: str, head: str | None, size: list[int] | None, folder: str) -> Prepared:
    """``path`` as a backend can run it: the outputs of ``head`` joined (see ``JOINS``), and
    a symbolic input height and width fixed to ``size`` (width, height). Unchanged models
    are loaded from where they are."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(path)
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    first = next(value for value in graph.input if value.name not in initializers)
    dims = first.type.tensor_type.shape.dim
    changed = False
    if len(dims) == 4 and any(not dim.HasField("dim_value") for dim in dims[1:]):
        if size is None:
            raise ConfigError(
                f"model {Path(path).name} has no fixed input size ({_shape(dims)}): set "
                "input_size = [width, height]",
                key="input_size",
            )
        channels_last = dims[3].HasField("dim_value") and dims[3].dim_value == 3
        height_at, width_at = (1, 2) if channels_last else (2, 3)
        for at, value in ((height_at, size[1]), (width_at, size[0])):
            dims[at].ClearField("dim_param")
            dims[at].dim_value = value
        del graph.value_info[:]
        changed = True
    if changed and explicit_pads(model):
        log.debug("%s: SAME padding written out as explicit pads", Path(path).name)
    joined = None
    groups = JOINS.get(head or "")
    if groups:
        names = {output.name for output in graph.output}
        missing = sorted({name for group in groups for name in group} - names)
        if missing:
            raise ConfigError(
                f"model {Path(path).name} lacks the {head} outputs {', '.join(missing)} "
                f"(has {', '.join(sorted(names))})",
                key="head",
            )
        parts = []
        for index, group in enumerate(groups):
            part = f"{JOINED}_{index}"
            graph.node.append(helper.make_node("Concat", group, [part], axis=2))
            parts.append(part)
        graph.node.append(helper.make_node("Concat", parts, [JOINED], axis=1))
        del graph.output[:]
        graph.output.append(helper.make_tensor_value_info(JOINED, TensorProto.FLOAT, None))
        joined, changed = head, True
    shape = tuple(dim.dim_value for dim in dims[1:])
    if not changed:
        return Prepared(path, None, shape)
    target = os.path.join(folder, Path(path).stem + ".prepared.onnx")
    onnx.save(model, target)
    return Prepared(target, joined, shape)


def explicit_pads(model: Any) -> int:
    """Convolutions and pools with ``auto_pad = SAME_UPPER/SAME_LOWER`` (PaddleOCR's exports)
    given the same padding as explicit ``pads``, from the shapes the fixed input size gives:
    the torch backend's converter (onnx2torch) takes only explicit pads; ONNX Runtime
    computes the same either way. Returns how many were rewritten."""
    from onnx import helper, shape_inference

    graph = model.graph
    same = [
        node for node in graph.node
        if any(a.name == "auto_pad" and a.s in (b"SAME_UPPER", b"SAME_LOWER")
               for a in node.attribute)
    ]  # fmt: skip
    if not same:
        return 0
    inferred = shape_inference.infer_shapes(model).graph
    shapes = {
        value.name: [d.dim_value if d.HasField("dim_value") else 0
                     for d in value.type.tensor_type.shape.dim]
        for value in [*inferred.value_info, *inferred.input]
    }  # fmt: skip
    weights = {init.name: list(init.dims) for init in graph.initializer}
    rewritten = 0
    for node in same:
        attrs = {a.name: a for a in node.attribute}
        spatial = shapes.get(node.input[0], [])[2:]
        kernel = list(attrs["kernel_shape"].ints) if "kernel_shape" in attrs else (
            weights.get(node.input[1], [])[2:] if len(node.input) > 1 else [])  # fmt: skip
        if not spatial or not all(spatial) or len(kernel) != len(spatial):
            continue  # a shape not known: left to the backend
        strides = list(attrs["strides"].ints) if "strides" in attrs else [1] * len(kernel)
        dilations = list(attrs["dilations"].ints) if "dilations" in attrs else [1] * len(kernel)
        upper = attrs["auto_pad"].s == b"SAME_UPPER"
        begin, end = [], []
        for size, k, stride, dilation in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((-(-size // stride) - 1) * stride + (k - 1) * dilation + 1 - size, 0)
            # SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the start.
            begin.append(total // 2 if upper else total - total // 2)
            end.append(total - begin[-1])
        node.attribute.remove(attrs["auto_pad"])
        node.attribute.append(helper.make_attribute("pads", begin + end))
        rewritten += 1
    return rewritten


def _shape(dims: Any) -> str:
    return "x".join(dim.dim_param or str(dim.dim_value) for dim in dims)


class ObjectModel:
    """The model of one node: loaded once, at open; ``run`` takes crops, gives outputs."""

    def __init__(self, node: str, config: ObjectModelConfig, head: str | None = None) -> None:
        self.node, self.config = node, config
        self.head = head
        """The detect head whose outputs are joined (``yunet``, ``ultraface``), if any."""
        self.backend: Backend | None = None
        self._folder: str | None = None

    path: Path
    joined: str | None = None
    """The head whose outputs were joined into one, if any."""
    size: tuple[int, int]
    """The model's input (width, height)."""
    channels_last: bool
    normalise: Normalise
    metadata: dict[str, str]
    entry: dict[str, Any]

    def load(self) -> ObjectModel:
        cfg = self.config
        self.path = resolve_model(cfg.model)
        check_onnx(self.path)
        self.entry = model_entry(cfg.model)
        self._folder = tempfile.mkdtemp(prefix="vapipe-objects-")
        size = cfg.input_size or self.entry.get("input_size")
        head = self.head
        if head == "auto":  # a face head shows in the output names; else one output is read
            head = head_of(output_names(str(self.path)), None)
        prepared = prepare(str(self.path), head, size, self._folder)
        self.joined = prepared.joined
        self.channels_last = self._layout(prepared.input_shape)
        c_h_w = prepared.input_shape
        height, width = c_h_w[:2] if self.channels_last else c_h_w[1:]
        self.size = (int(width), int(height))
        self.normalise = self._normalise()
        self.backend = load_backend(prepared.path, self.node, cfg.backend, cfg.max_batch)
        self.metadata = dict(self.backend.info.metadata)
        log.info(
            "%s: %s (%dx%d %s, %s) on %s",
            self.node,
            self.path.name,
            self.size[0],
            self.size[1],
            "NHWC" if self.channels_last else "NCHW",
            self.normalise.color,
            self.backend.device,
        )
        return self

    def _layout(self, shape: tuple[int, ...]) -> bool:
        wanted = self.config.input.layout
        if len(shape) != 3:
            raise ConfigError(
                f"model {self.path.name} takes a {len(shape) + 1}-dimensional input; a picture "
                "model takes N x C x H x W or N x H x W x C",
                key="model",
            )
        if wanted != "auto":
            return wanted == "nhwc"
        return shape[2] == 3 and shape[0] != 3

    def _normalise(self) -> Normalise:
        given = self.config.input
        preset = self.entry.get("input", {})
        scale = given.scale or preset.get("scale") or 1 / 255
        return Normalise(
            color=given.color or preset.get("color") or "rgb",
            scale=float(scale),
            mean=tuple(given.mean or preset.get("mean") or (0.0, 0.0, 0.0)),
            std=tuple(given.std or preset.get("std") or (1.0, 1.0, 1.0)),
        )

    def tensor(self, crops: np.ndarray) -> np.ndarray:
        """N x H x W x 3 uint8 BGR crops -> the model's input batch."""
        batch = self.normalise.apply(crops)
        if not self.channels_last:
            batch = np.ascontiguousarray(batch.transpose(0, 3, 1, 2))
        return batch

    def run(self, crops: np.ndarray) -> np.ndarray:
        """The model's (first or joined) output for N crops, N x ..."""
        if self.backend is None:
            raise RuntimeError(f"{self.node}: the model is not loaded")
        return self.run_input(self.tensor(crops))

    def run_input(self, batch: np.ndarray) -> np.ndarray:
        """The model's output for an input batch already made (``OpenCLCrops``)."""
        if self.backend is None:
            raise RuntimeError(f"{self.node}: the model is not loaded")
        return np.asarray(self.backend.run(batch), np.float32)

    def close(self) -> dict[str, Any]:
        backend, self.backend = self.backend, None
        folder, self._folder = self._folder, None
        return release(backend, folder)


def release(backend: Backend | None, folder: str | None) -> dict[str, Any]:
    """A loaded model let go: its backend's stats (taken before it closes), the backend
    closed, and the folder its prepared file lay in removed."""
    stats = backend.stats() if backend is not None else {}
    if backend is not None:
        backend.close()
    if folder:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    return stats
