"""The infer node's keys: the model, its head, batching, the detection schedule and the
backend that runs it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.choice import AutoConfig
from vapipe.stages.infer.backends.config import BackendConfig, backend_shorthand


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
        return backend_shorthand(data)

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

    def models(self) -> dict[str, str]:
        return {"model": self.model}
