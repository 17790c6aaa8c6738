"""Batched YOLO inference: ONNX Runtime (execution provider chosen from a list) or PyTorch."""

from __future__ import annotations

import logging
from typing import Any, cast

import numpy as np

from vapipe.pipeline.assets import Kind, model_entry
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, StageConfig, StageContext
from vapipe.stages.infer.config import InferConfig
from vapipe.stages.infer.graph_decode import candidates_from_rows
from vapipe.stages.infer.heads import decode
from vapipe.stages.infer.model import Model

log = logging.getLogger(__name__)


@register("infer")
class InferStage(BatchStage):
    """Runs a YOLO ONNX model on batches of preprocessed frames and decodes its head."""

    reads_pixels = False

    Config = InferConfig
    config: InferConfig

    @classmethod
    def assets_needed(cls, config: InferConfig) -> list[tuple[Kind, str]]:
        return [("models", config.model)] if model_entry(config.model) else []

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.model = Model(name, self.config)
        self.max_batch = self.model.max_batch
        self.batch_timeout_s = self.model.batch_timeout_s
        self.schedule = self.model.schedule

    def shares(self) -> Model:
        return self.model

    def open(self, context: StageContext) -> None:
        self.model.load()

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        # A frame a motion node flagged still is skipped (the tracker holds its tracks).
        if self.schedule.active:
            for frame in items:
                asked, frame.scheduled = frame.scheduled, False  # by the preprocess node
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
        if self.model.backend is None:
            raise PipelineError("the model is not loaded (the node was closed)")
        by_size: dict[tuple[int, ...], list[Frame]] = {}
        for frame in items:  # one size unless rect inputs come from cameras of other sizes
            by_size.setdefault(cast(np.ndarray, frame.tensor).shape, []).append(frame)
        for group in by_size.values():
            self._detect_one_size(group)

    def _detect_one_size(self, items: list[Frame]) -> None:
        model = self.model
        assert model.backend is not None
        batch = as_batch([cast(np.ndarray, frame.tensor) for frame in items])  # checked above
        if model.device_decoder is not None and model.on_device is not None:
            candidates = model.device_decoder(model.on_device.run_on_device(batch))
        else:
            output = model.backend.run(batch)
            if model.head is not None:
                candidates = candidates_from_rows(output, model.names)
            else:
                height, width = batch.shape[-2:]
                candidates = decode(model.family, output, width, height, model.names)
        on_device = not isinstance(batch, np.ndarray)
        for frame, found in zip(items, candidates, strict=True):
            frame.detections = found
            if on_device:  # read by now (the detections came back): free the device memory
                frame.tensor = None

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":
            self.schedule.forget(message.source_id)
        return (message,)

    def close(self) -> None:
        if self.model.backend is not None:
            self._last_stats = self.model.close()

    _last_stats: dict[str, Any] = {}

    def stats(self) -> dict[str, Any]:
        model = self.model
        base = model.backend.stats() if model.backend else self._last_stats
        schedule = self.schedule
        skipping = (
            {"detected_frames": schedule.detected, "predicted_frames": schedule.skipped}
            if schedule.interval > 1 or schedule.interval_s
            else {}
        )
        loaded = model.loaded
        head = "in the model" if model.head is not None else "host"
        decoder = model.device_decoder
        # Whether the head decode's CUDA graphs ran (a failed capture turns them off).
        graphs = decoder.graphs.stats() if decoder is not None and decoder.graphs else {}
        return {
            **base,
            **{f"head_decode_{key}": value for key, value in graphs.items()},
            "rect": loaded and model.input.rect,
            "head_decode": "on the device" if decoder is not None else head,
            "model_family": model.family.value if loaded else None,
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
