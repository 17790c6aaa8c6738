"""Batched YOLO inference on ONNX Runtime, with the execution provider chosen from a list."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from pipeline.assets import model_entry, resolve_model
from pipeline.errors import ConfigError, PipelineError
from pipeline.frame import Frame
from pipeline.registry import register
from pipeline.stage import BatchStage, StageConfig, StageContext

from . import providers as eps
from .yolo_heads import Family, class_names, conventions, decode, detect_family

log = logging.getLogger(__name__)


class InferConfig(StageConfig):
    model: str
    """A manifest name (``yolox-nano``, ``yolov8n``) or a path to an ONNX file."""
    family: Literal["auto", "yolox", "yolov5", "yolov8", "end2end"] = "auto"
    """The output layout; ``auto`` reads the output shape and ONNX metadata."""
    names_file: str | None = None
    """Class names, one per line; default: the model's ``names`` metadata, else COCO."""
    providers: str | list[str] = "auto"
    """Execution providers in order of preference (``migraphx``, ``rocm``, ``tensorrt``,
    ``cuda``, ``openvino``, ``cpu`` or full names), or ``auto`` for that order. Unavailable
    ones are skipped with a warning; CPU always ends the list."""
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per provider options, e.g. ``{ migraphx = { migraphx_fp16_enable = 1 } }``."""
    fp16: bool = False
    """Half precision where the provider supports it (MIGraphX, TensorRT, OpenVINO)."""
    cache_dir: str | None = None
    """Compiled-model cache for MIGraphX / TensorRT / OpenVINO, so restarts do not recompile."""
    max_batch: int = Field(1, ge=1, le=256)
    """Frames per inference call, from any sources."""
    batch_timeout_ms: float = Field(5.0, ge=0)
    """How long to wait for a batch to fill after its first frame."""
    threads: int = Field(0, ge=0)
    """ONNX Runtime intra-op threads; 0 lets ONNX Runtime choose (one per core)."""
    input_size: list[int] | None = None
    """``[width, height]`` for models whose input size is not fixed in the file."""


@dataclass(frozen=True)
class ModelInput:
    """What the model expects: preprocessing reads this from the infer node when it opens."""

    width: int
    height: int
    color: str
    scale: float
    placement: str
    pad_value: int
    dtype: np.dtype


@register("infer")
class InferStage(BatchStage):
    """Runs a YOLO ONNX model on batches of preprocessed frames and decodes its head."""

    Config = InferConfig
    config: InferConfig

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.max_batch = cfg.max_batch
        self.batch_timeout_s = cfg.batch_timeout_ms / 1000.0
        path = resolve_model(cfg.model)
        self.session = self._create_session(str(path))
        meta = self.session.get_modelmeta().custom_metadata_map
        model_in = self.session.get_inputs()[0]
        self.input_name = model_in.name
        batch_dim, _, height, width = (list(model_in.shape) + [None] * 4)[:4]
        if cfg.input_size:
            width, height = cfg.input_size
        if not isinstance(width, int) or not isinstance(height, int):
            raise ConfigError(
                f"model input {model_in.shape} has no fixed size: set input_size", key="input_size"
            )
        self.fixed_batch = batch_dim if isinstance(batch_dim, int) else None
        output_shape = self.session.get_outputs()[0].shape
        if cfg.family == "auto":
            family = detect_family(output_shape, meta, width, height)
            if family is None:
                family_hint = model_entry(cfg.model).get("family")
                if not family_hint:
                    raise ConfigError(
                        f"cannot tell the YOLO family from output shape {output_shape}; set family",
                        key="family",
                    )
                family = Family(family_hint)
        else:
            family = Family(cfg.family)
        self.family = family
        self.names = class_names(meta, cfg.names_file)
        conv = conventions(family)
        dtype = np.float16 if model_in.type == "tensor(float16)" else np.float32
        self.model_input = ModelInput(
            width, height, conv.color, conv.scale, conv.placement, conv.pad_value, np.dtype(dtype)
        )
        self.provider = self.session.get_providers()[0]
        log.info(
            "%s: %s (%s, %dx%d, batch %s) on %s",
            self.name,
            path.name,
            family.value,
            width,
            height,
            self.fixed_batch or "dynamic",
            self.provider,
        )

    def _create_session(self, path: str) -> Any:
        import onnxruntime as ort

        cfg = self.config
        available = ort.get_available_providers()
        names, options, skipped = eps.choose(
            cfg.providers, available, cfg.provider_options, fp16=cfg.fp16, cache_dir=cfg.cache_dir
        )
        for provider in skipped:
            log.warning(
                "%s: %s is not in this onnxruntime build (available: %s); skipped",
                self.name,
                provider,
                ", ".join(available),
            )
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if cfg.threads:
            session_options.intra_op_num_threads = cfg.threads
        # Spinning intra-op threads would steal the cores that decode and encode run on.
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(
                path, session_options, providers=names, provider_options=options
            )
        except Exception as exc:
            raise PipelineError(f"cannot load model {path}: {exc}") from exc

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        for index, frame in enumerate(items):
            if frame.tensor is None:
                raise PipelineError(
                    f"frame {index} of the batch has no tensor: link a "
                    "preprocess node before this infer node"
                )
        if self.fixed_batch is not None and self.fixed_batch != len(items):
            outputs = [self._run(np.ascontiguousarray(f.tensor[None])) for f in items]
            output = np.concatenate(outputs)
        else:
            output = self._run(np.stack([f.tensor for f in items]))
        candidates = decode(self.family, output, self.model_input.width, self.model_input.height)
        for frame, found in zip(items, candidates, strict=True):
            frame.meta["candidates"] = found
            frame.meta["class_names"] = self.names
        return items

    def _run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: batch})[0]

    def close(self) -> None:
        self.session = None

    def stats(self) -> dict[str, Any]:
        return {
            "provider": getattr(self, "provider", None),
            "model_family": str(self.family) if hasattr(self, "family") else None,
            "max_batch": self.config.max_batch,
        }
