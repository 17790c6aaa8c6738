"""The keys of a node that runs a model on the objects a tracker carries: which objects, the
crop, when a track is tried again, when a result holds, and per kind (classify, detect
inside, embed) what its outputs mean."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.choice import AutoConfig
from vapipe.stages.infer.backends.config import BackendConfig, backend_shorthand


class InputConfig(StageConfig):
    """How a crop becomes the model's input: ``(pixel * scale - mean) / std`` per channel, in
    the channel order ``color``. Unset keys come from the model's manifest entry, else
    ``rgb``, ``1/255``, 0 and 1 (what torchvision and Ultralytics classifiers take, less
    ImageNet's mean and std: set them for a torchvision or timm model)."""

    color: Literal["rgb", "bgr"] | None = None
    """Channel order of the model's input."""
    scale: float | None = Field(None, gt=0)
    """Pixels (0-255) are multiplied by this first."""
    mean: list[float] | None = Field(None, min_length=3, max_length=3)
    """Subtracted after ``scale``, per channel in the model's order."""
    std: list[float] | None = Field(None, min_length=3, max_length=3)
    """Divided by after ``mean``, per channel (none may be 0)."""
    layout: Literal["auto", "nchw", "nhwc"] = "auto"
    """Tensor layout; ``auto`` reads it from the model's input shape (3 last: NHWC)."""

    @model_validator(mode="after")
    def _no_zero_std(self) -> InputConfig:
        if self.std is not None and any(value == 0 for value in self.std):
            raise ValueError("std: no channel may be divided by 0")
        return self


class ObjectModelConfig(StageConfig):
    """What every node that runs a model on found objects takes."""

    @model_validator(mode="before")
    @classmethod
    def _backend_shorthand(cls, data: Any) -> Any:
        return backend_shorthand(data)

    @model_validator(mode="after")
    def _rules_fit(self) -> ObjectModelConfig:
        if self.min_attempts > self.attempts:
            raise ValueError(
                f"min_attempts ({self.min_attempts}) is more than attempts ({self.attempts}): "
                "no result could ever hold"
            )
        x1, y1, x2, y2 = self.region
        if not (0 <= x1 < x2 <= 1 and 0 <= y1 < y2 <= 1):
            raise ValueError("region: [x1, y1, x2, y2] fractions of the box, x1 < x2, y1 < y2")
        return self

    model: str
    """A manifest name (``mobilefacenet``, ``yunet``...) or a path to an ONNX file."""

    def models(self) -> dict[str, str]:
        return {"model": self.model}

    on_classes: list[str] | None = None
    """Class names of the objects it runs on (``["car", "truck"]``); default: every tracked
    object (or every box of ``on``)."""
    on: str | None = None
    """Run on the boxes another node found inside the objects (a ``detect_inside`` node
    before this one: person -> face -> embedding), one per object: that node's best box."""
    min_size: int = Field(16, ge=1)
    """Boxes whose shorter side is below this many pixels are skipped (counted as
    ``too_small``)."""
    skip_at_edge: bool = True
    """Skip boxes that touch the frame's border (a part of the object is outside; counted as
    ``at_edge``): it is tried once it is wholly in view."""
    region: list[float] = Field([0.0, 0.0, 1.0, 1.0], min_length=4, max_length=4)
    """The part of the box to crop, ``[x1, y1, x2, y2]`` in fractions of it (``[0, 0, 1,
    0.5]``: the upper half of a person, where the face is)."""
    margin: float = Field(0.0, ge=0, le=2)
    """Added on each side of the box, as a fraction of its width and height."""
    fit: Literal["letterbox", "square", "stretch"] = "letterbox"
    """How the crop meets the model's input: ``letterbox`` keeps its aspect and pads,
    ``square`` widens the box to a square around its centre (more context, no padding),
    ``stretch`` resizes it as it is."""
    attempts: int = Field(3, ge=1, le=1000)
    """Model calls per track and round at most. A round starts when the track is new, when
    its box has grown by ``grow``, and every ``reinfer_s``."""
    retry_s: float = Field(0.2, ge=0)
    """Stream seconds between two attempts on one track (several views, not one view many
    times)."""
    reinfer_s: float | None = Field(None, gt=0)
    """Start a new round this long after the last one started (a result may change: a jacket
    taken off); default: never."""
    grow: float | None = Field(1.5, gt=1)
    """Start a new round when the box's area has grown by this factor since the last attempt
    (the object came closer: a better view); None: never."""
    threshold: float | None = Field(None, ge=0, le=1)
    """An attempt votes for its label only at this score or above (an embed node's attempts
    always vote: for a gallery name at ``match`` or above, else for ``unknown``). Unset: the
    model's own (``threshold`` in its manifest entry), else 0.5."""
    min_attempts: int = Field(2, ge=1)
    """A result holds after at least this many attempts of its round..."""
    agree: float = Field(0.6, gt=0, le=1)
    """...when this fraction of them voted for the same label (Frigate's rule: 60% of at
    least 3). The result stays until a new round gives one."""
    max_batch: int = Field(16, ge=1, le=256)
    """Crops per model call, from any objects of any sources."""
    batch_timeout_ms: float = Field(5.0, ge=0)
    """How long to wait for more frames after the first."""
    max_crops_per_s: float = Field(0.0, ge=0)
    """At most this many crops a second of wall time go to the model (0: no cap); the rest
    wait for a later frame, counted as ``deferred``."""
    input: InputConfig = Field(default_factory=InputConfig)
    """The ``[nodes.NAME.input]`` table: colour order, scale, mean and std, layout."""
    input_size: list[int] | None = Field(None, min_length=2, max_length=2)
    """``[width, height]`` for models whose input size is not fixed in the file (YuNet)."""
    backend: BackendConfig = Field(default_factory=AutoConfig)
    """As the infer node's ``backend`` (onnxruntime providers, torch device)."""
    crops: Literal["auto", "numpy", "opencl"] = "auto"
    """Where crops are cut, resized and normalised: ``auto`` (OpenCL on a GPU whose kernel
    builds, else numpy), ``numpy`` (OpenCV, crop by crop, from the decoded planes) or
    ``opencl`` (one kernel for every crop of a batch, on a GPU where there is one, else any
    OpenCL device; numpy with a warning where none works). Both give the same input within
    one level of a pixel; on the H100 machine (16 x 1080p, re-id on every person) OpenCL
    costs 0.91x of detect + track where numpy costs 0.79x."""


class ClassifyConfig(ObjectModelConfig):
    """A classifier on each object: its label and score."""

    labels_file: str | None = None
    """Labels, one per line; default: the model's ``names`` metadata (Ultralytics ``-cls``
    exports), else ``class_N``."""
    activation: Literal["auto", "softmax", "sigmoid", "none"] = "auto"
    """What turns the output into scores: ``auto`` applies softmax unless the output is
    already probabilities (rows of 0-1 summing to 1)."""


class DetectInsideConfig(ObjectModelConfig):
    """A detector run inside each object (a face in a person, a plate in a car)."""

    min_attempts: int = Field(1, ge=1)
    """A result holds after this many attempts (default 1: the first that finds a box)."""
    agree: float = Field(1.0, gt=0, le=1)
    """...when this fraction of them found one (default: all)."""
    head: Literal["auto", "yunet", "ultraface", "yolox", "yolov5", "yolov8", "end2end"] = "auto"
    """The output layout; ``auto`` reads the outputs' names and shapes."""
    conf: float = Field(0.6, ge=0, le=1)
    """Boxes below this score are dropped."""
    iou: float = Field(0.45, gt=0, le=1)
    """NMS IoU threshold within one crop."""
    max_boxes: int = Field(1, ge=1, le=100)
    """Boxes kept per object, best first (a node with ``on`` reads the best)."""
    label: str | None = None
    """The name of what it finds; default: ``face`` for face heads, the class names of a
    YOLO model."""
    names_file: str | None = None
    """Class names of a YOLO model, one per line; default: its metadata, else COCO."""


class EmbedConfig(ObjectModelConfig):
    """A vector per object, matched against a gallery of named pictures."""

    gallery: str | None = None
    """A folder with a folder per name of pictures (``gallery/alice/1.jpg``), or None. With
    ``on`` (a face node), each picture must show one face: the face that node's model finds
    there is embedded. The folder is read again when a file in it changes."""
    match: float | None = Field(None, ge=-1, le=1)
    """The cosine similarity a gallery name needs; under it an object is ``unknown``. Unset:
    the model's own, from its manifest entry (measured: person-reid 0.89, mobilefacenet 0.68,
    at most 1% of two different people matched on the sample clip), else 0.45."""
    gallery_check_s: float = Field(2.0, gt=0)
    """How often (wall seconds) the gallery folder is checked for changes."""
    vector: bool = False
    """Write the vector itself into the events (``attributes.NAME.vector``)."""


def check_file(path: str | None, key: str) -> None:
    """A file a node's key names must be there (checked before anything opens)."""
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{path}: no such file", key=key)
