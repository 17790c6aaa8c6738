"""Batched YOLO inference: ONNX Runtime (execution provider chosen from a list) or PyTorch."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from pydantic import Field, model_validator

from vapipe.pipeline.assets import Kind, model_entry, resolve_model
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, StageConfig, StageContext
from vapipe.stages.infer.backends import Backend, ModelInfo, load_backend
from vapipe.stages.infer.backends.config import AutoConfig, BackendConfig
from vapipe.stages.infer.device_decode import DeviceDecoder, Selection
from vapipe.stages.infer.graph_decode import FAMILIES as GRAPH_FAMILIES
from vapipe.stages.infer.graph_decode import HeadLayout, candidates_from_rows
from vapipe.stages.infer.heads import (
    Family,
    conventions,
    decode,
    detect_family,
    layout_problem,
)
from vapipe.stages.infer.interval import SCHEDULED, DetectionSchedule
from vapipe.stages.infer.names import class_names
from vapipe.stages.nms import NmsStage
from vapipe.stages.preprocess.geometry import Color, Placement

log = logging.getLogger(__name__)


class InferConfig(StageConfig):
    """The model, its head, batching and the backend that runs it."""

    @model_validator(mode="after")
    def _one_rate(self) -> InferConfig:
        if self.interval > 1 and self.interval_s is not None:
            raise ValueError("set interval or interval_s, not both")
        return self

    @model_validator(mode="before")
    @classmethod
    def _backend_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("backend"), str):
            return {**data, "backend": {"type": data["backend"]}}
        return data

    model: str
    """A manifest name (``yolox-nano``, ``yolov8n``) or a path to an ONNX file."""
    family: Literal["auto", "yolox", "yolov5", "yolov8", "end2end"] = "auto"
    """The output layout; ``auto`` reads the output shape and ONNX metadata."""
    names_file: str | None = None
    """Class names, one per line; default: the model's ``names`` metadata, else COCO."""
    backend: BackendConfig = Field(default_factory=AutoConfig)
    """The ``[nodes.NAME.backend]`` table: ``type = "onnxruntime"`` (``providers``,
    ``provider_options``, ``fp16``, ``cache_dir``, ``io_binding``, ``threads``),
    ``type = "torch"`` (``device``, ``fp16``, ``cuda_graphs``) or ``type = "auto"``, the default
    without a table: the best this machine has (the log says which and why).
    ``backend = "torch"`` is short for the table."""
    max_batch: int = Field(1, ge=1, le=256)
    """Frames per inference call, from any sources. A model exported with a fixed batch of 1
    is made batch-dynamic when that provably keeps its outputs, else run frame by frame."""
    batch_timeout_ms: float = Field(5.0, ge=0)
    """How long to wait for a batch to fill after its first frame."""
    workers: int = Field(1, ge=1, le=16)
    """Inference calls in flight at once, each from its own thread on one shared session. On
    CPUs, ``workers = cores`` with ``threads = 1`` keeps every core on useful work; on a GPU,
    2 overlaps one batch's transfers with another's compute. Outputs keep their order."""
    interval: int = Field(0, ge=0, le=1000)
    """Detect on one frame in this many per source (0 or 1: every frame). The frames between
    go on without detections, flagged ``predicted``: a ``track`` node after this one gives
    them its tracks' predicted boxes, so zones and the video still see every frame (lines
    count on detected frames: a guess never counts a crossing).
    Sources are staggered, so that each batch holds about as many frames as without it."""
    interval_s: float | None = Field(None, gt=0)
    """Instead of ``interval``: detect on a source's frame when this many seconds of its
    stream time have passed since the last detected one (its first frame is detected)."""
    input_size: list[int] | None = Field(None, min_length=2, max_length=2)
    """``[width, height]`` for models whose input size is not fixed in the file."""
    rect: bool = False
    """Pad each picture only up to a multiple of 32, not to the model's square: a 16:9
    camera into a 416x416 model becomes 416x256, 0.62 of the compute, with the same scale
    (Ultralytics' rectangular inference). Needs the onnxruntime backend and a model whose
    graph computes its shapes (YOLOX exports; Ultralytics ones exported with
    ``dynamic=True``): checked when the node opens. Frames of different sizes are batched
    by size."""
    decode_on_device: bool | None = None
    """Decode the YOLO head (YOLOX, v5, v8) where the model runs, not in numpy. On torch:
    decode, score filter and NMS on its device, with the settings of the ``nms`` node that
    follows, so only the kept boxes cross to the host. On onnxruntime: the decode is appended
    to the model, so the provider returns 6 numbers per anchor instead of the raw head
    (84-85), and the nms node runs as usual. Default: on for GPUs and other accelerator
    providers, off on the CPU (where ``true`` works too)."""


@dataclass(frozen=True)
class ModelInput:
    """What the model expects: preprocessing reads this from the infer node when it opens."""

    width: int
    height: int
    color: Color
    scale: float
    placement: Placement
    dtype: np.dtype
    rect: bool = False
    """The model takes any multiple of :data:`RECT_STRIDE` up to its own size."""


RECT_STRIDE = 32
"""The largest stride of YOLO heads: rect inputs are multiples of it."""


@register("infer")
class InferStage(BatchStage):
    """Runs a YOLO ONNX model on batches of preprocessed frames and decodes its head."""

    reads_pixels = False

    Config = InferConfig
    config: InferConfig
    backend: Backend | None = None

    @classmethod
    def assets_needed(cls, config: InferConfig) -> list[tuple[Kind, str]]:
        return [("models", config.model)] if model_entry(config.model) else []

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.max_batch = cfg.max_batch
        self.schedule = DetectionSchedule(cfg.interval, cfg.interval_s)
        self.batch_timeout_s = cfg.batch_timeout_ms / 1000.0
        path = resolve_model(cfg.model)
        self.backend = load_backend(
            str(path),
            self.name,
            cfg.backend,
            cfg.max_batch,
            head=self._head_in_model,
            workers=cfg.workers,
            rect=cfg.rect,
        )
        info = self.backend.info
        width, height = self._input_size(info)
        self.family = self._family(info.output_shape, info.metadata, width, height)
        self.names = class_names(info.metadata, cfg.names_file)
        self.head: HeadLayout | None = getattr(self.backend, "head", None)
        self.device_decoder = self._device_decoder(context, self.backend, width, height)
        # Only the torch backend has it; the device decoder is made only for it.
        self.run_on_device = getattr(self.backend, "run_on_device", None)
        conv = conventions(self.family)
        self.model_input = ModelInput(
            width, height, conv.color, conv.scale, conv.placement, info.input_dtype,
            self._rect(path.name),
        )  # fmt: skip
        log.info(
            "%s: %s (%s, %dx%d, max_batch %d) on %s",
            self.name,
            path.name,
            self.family.value,
            width,
            height,
            cfg.max_batch,
            self.backend.device,
        )

    def _rect(self, model_name: str) -> bool:
        """Whether inputs of other sizes go to the model (``rect``); a model that cannot take
        them is a config error, a backend that cannot a warning (the square is used)."""
        if not self.config.rect:
            return False
        if not hasattr(self.backend, "rect_problem"):  # only onnxruntime can free the size
            log.warning("%s: rect = true needs the onnxruntime backend; square inputs", self.name)
            return False
        problem: str | None = getattr(self.backend, "rect_problem", None)
        if problem:
            raise ConfigError(f"model {model_name} cannot take other input sizes: {problem}; "
                              "set rect = false", key="rect")  # fmt: skip
        return True

    def _input_size(self, info: ModelInfo) -> tuple[int, int]:
        width, height = (list(info.input_shape) + [None] * 4)[3:1:-1]
        if self.config.input_size:
            width, height = self.config.input_size
        if not isinstance(width, int) or not isinstance(height, int):
            raise ConfigError(
                f"model input {info.input_shape} has no fixed size: set input_size",
                key="input_size",
            )
        return width, height

    def _head_in_model(self, info: ModelInfo, accelerated: bool) -> HeadLayout | None:
        """For onnxruntime: the head to decode inside the model (on by default where an
        accelerator provider runs it), or None to decode it on the host."""
        wanted = self.config.decode_on_device
        if wanted is False or (wanted is None and not accelerated):
            return None
        if self.config.rect:  # the appended decode has one grid, for one input size
            log.info("%s: head decoded on the host (rect inputs vary in size)", self.name)
            return None
        width, height = self._input_size(info)
        family = self._family(info.output_shape, info.metadata, width, height)
        return HeadLayout(family, width, height) if family in GRAPH_FAMILIES else None

    def _device_decoder(
        self, context: StageContext, backend: Backend, width: int, height: int
    ) -> DeviceDecoder | None:
        """For torch: the decoder that runs on its device, or None."""
        wanted = self.config.decode_on_device
        on_gpu = getattr(getattr(backend, "torch_device", None), "type", "cpu") != "cpu"
        if self.head is not None or wanted is False or (wanted is None and not on_gpu):
            return None
        nms = context.find_downstream(NmsStage)
        why = None
        if self.family not in DeviceDecoder.families:
            why = f"{self.family.value} heads are suppressed in the model already"
        elif not hasattr(backend, "run_on_device"):
            why = getattr(backend, "head_problem", None) or "this backend cannot"
        elif nms is None:
            why = "no nms node follows this one"
        if why:
            if wanted:
                raise ConfigError(why, key="decode_on_device")
            return None
        assert nms is not None
        log.info(
            "%s: head decode and NMS on %s (settings of node '%s')",
            self.name,
            backend.device,
            nms.name,
        )
        return DeviceDecoder(self.family, width, height, self.names, Selection.of(nms.config))

    def _family(
        self, output_shape: list[Any], metadata: dict[str, str], width: int, height: int
    ) -> Family:
        if self.config.family != "auto":
            family = Family(self.config.family)
            problem = layout_problem(family, output_shape)
            if problem:
                raise ConfigError(
                    f"family '{family.value}' does not fit output shape {output_shape}: {problem}",
                    key="family",
                )
            return family
        detected = detect_family(output_shape, metadata, width, height)
        if detected is not None:
            return detected
        hint = model_entry(self.config.model).get("family")
        if not hint:
            raise ConfigError(
                f"cannot tell the YOLO family from output shape {output_shape}; set family",
                key="family",
            )
        return Family(hint)

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        # A frame a motion node flagged still is skipped (the tracker holds its tracks).
        if self.schedule.active:
            for frame in items:
                asked = frame.meta.pop(SCHEDULED, False)  # by the preprocess node
                if not frame.predicted and not asked:
                    frame.predicted = not self.schedule.due(frame)
        waiting = [frame for frame in items if not frame.predicted]
        if waiting:
            self._detect(waiting)
        return items

    def _detect(self, items: list[Frame]) -> None:
        for index, frame in enumerate(items):
            if frame.tensor is None:
                raise PipelineError(
                    f"frame {index} of the batch has no tensor: link a "
                    "preprocess node before this infer node"
                )
        if self.backend is None:
            raise PipelineError("the model is not loaded (the node was closed)")
        by_size: dict[tuple[int, ...], list[Frame]] = {}
        for frame in items:  # one size unless rect inputs come from cameras of other sizes
            by_size.setdefault(cast(np.ndarray, frame.tensor).shape, []).append(frame)
        for group in by_size.values():
            self._detect_one_size(group)

    def _detect_one_size(self, items: list[Frame]) -> None:
        assert self.backend is not None
        batch = as_batch([cast(np.ndarray, frame.tensor) for frame in items])  # checked above
        if self.device_decoder is not None and self.run_on_device is not None:
            candidates = self.device_decoder(self.run_on_device(batch))
        else:
            output = self.backend.run(batch)
            if self.head is not None:
                candidates = candidates_from_rows(output, self.names)
            else:
                height, width = batch.shape[-2:]
                candidates = decode(self.family, output, width, height, self.names)
        on_device = not isinstance(batch, np.ndarray)
        for frame, found in zip(items, candidates, strict=True):
            frame.detections = found
            if on_device:  # read by now (the detections came back): free the device memory
                frame.tensor = None

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed" and hasattr(self, "schedule"):
            self.schedule.forget(message.source_id)
        return (message,)

    def close(self) -> None:
        if self.backend is not None:
            self._stats = self.backend.stats()
            self.backend.close()
            self.backend = None

    def stats(self) -> dict[str, Any]:
        base = self.backend.stats() if self.backend else getattr(self, "_stats", {})
        family = getattr(self, "family", None)
        head = "in the model" if getattr(self, "head", None) else "host"
        schedule = getattr(self, "schedule", None)
        skipping = (
            {"detected_frames": schedule.detected, "predicted_frames": schedule.skipped}
            if schedule is not None and (schedule.interval > 1 or schedule.interval_s)
            else {}
        )
        model_input = getattr(self, "model_input", None)
        return {
            **base,
            "rect": bool(model_input and model_input.rect),
            "head_decode": "on the device" if getattr(self, "device_decoder", None) else head,
            "model_family": family.value if family else None,
            "max_batch": self.config.max_batch,
            **skipping,
        }


def as_batch(tensors: list[np.ndarray]) -> np.ndarray:
    """The tensors as one (N, C, H, W) array: the array they are consecutive views of, when
    preprocessing wrote them into one batch buffer (no copy), else a stacked copy. Torch
    tensors (made on the device by a torch preprocess node) stay torch tensors there."""
    if not isinstance(tensors[0], np.ndarray):
        return _as_device_batch(tensors)
    base = tensors[0].base
    if (
        isinstance(base, np.ndarray)
        and base.ndim == 4
        and base.shape[0] == len(tensors)
        and base.flags.c_contiguous
        and all(
            tensor.base is base
            and tensor.__array_interface__["data"][0]
            == base.__array_interface__["data"][0] + index * base.strides[0]
            for index, tensor in enumerate(tensors)
        )
    ):
        return base
    return np.stack(tensors)


def _as_device_batch(tensors: list[Any]) -> Any:
    """Consecutive same-shaped tensors of one storage (a preprocess batch) as one view of it,
    without a copy; others stacked."""
    first = tensors[0]
    step = first.numel() * first.element_size()
    storage = first.untyped_storage().data_ptr()
    if all(
        tensor.is_contiguous()
        and tensor.shape == first.shape
        and tensor.dtype == first.dtype
        and tensor.untyped_storage().data_ptr() == storage
        and tensor.data_ptr() == first.data_ptr() + index * step
        for index, tensor in enumerate(tensors)
    ):
        return first.as_strided((len(tensors), *first.shape), (first.numel(), *first.stride()))
    import torch

    return torch.stack(tensors)
