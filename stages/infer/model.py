"""A detector model as data: one object per infer node, made when the graph is built and
handed to every node bound to it (the preprocess node before it, the nms node after it).

It holds what the config says (file, family wanted, class names file, input size, batch
policy, detection schedule, backend) and, once loaded, what the model file and the backend
answered (head family, class names, input conventions, device). Loading happens once, by
whichever bound node opens first; nodes never search the graph for one another.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from vapipe.pipeline.assets import model_entry, resolve_model
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.infer.backends import load_backend
from vapipe.stages.infer.backends.base import Backend, ModelInfo
from vapipe.stages.infer.config import InferConfig
from vapipe.stages.infer.device_decode import DeviceDecoder
from vapipe.stages.infer.graph_decode import FAMILIES as GRAPH_FAMILIES
from vapipe.stages.infer.graph_decode import HeadLayout
from vapipe.stages.infer.heads import Family, conventions, detect_family, layout_problem
from vapipe.stages.infer.interval import DetectionSchedule
from vapipe.stages.infer.names import class_names
from vapipe.stages.model_input import ModelInput
from vapipe.stages.nms import Selection
from vapipe.stages.onnx_file import check_onnx

log = logging.getLogger(__name__)

# What a backend may offer beyond ``Backend``, each declared here and checked once when the
# model loads.


@runtime_checkable
class DecodesInModel(Protocol):
    """A backend that can append the YOLO head's decode to the model (onnxruntime)."""

    head: HeadLayout | None
    """The head decoded inside the model, None where it is decoded on the host."""
    head_problem: str | None
    """Why the head could not be decoded inside the model, if it could not."""


@runtime_checkable
class TakesOtherSizes(Protocol):
    """A backend that can free the model's input size for rect inputs (onnxruntime)."""

    rect_problem: str | None
    """Why this model cannot take other input sizes, None when it can."""


@runtime_checkable
class RunsOnDevice(Protocol):
    """A backend whose model runs on a torch device, taking and giving device tensors."""

    torch_device: Any
    """The ``torch.device`` the model runs on."""

    def run_on_device(self, batch: Any) -> Any:
        """The model's first output for a batch, left on the device."""
        ...


class Model:
    """One detector model: its config now, what it loaded once ``load`` ran."""

    def __init__(self, node: str, config: InferConfig) -> None:
        self.node = node
        """The infer node that runs it (named in its log lines and errors)."""
        self.config = config
        self.max_batch = config.max_batch
        self.batch_timeout_s = config.batch_timeout_ms / 1000.0
        self.schedule = DetectionSchedule(config.interval, config.interval_s)
        """Which frames it sees: asked by the preprocess node (which then makes no tensor
        for a skipped frame) or else by the infer node."""
        self.suppression: Selection | None = None
        """The settings of the nms node bound to it (set when the graph is built): a decode
        on the device selects as that node would."""
        self.backend: Backend | None = None
        self._lock = threading.Lock()
        self._loaded = False

    # -- what loading found -------------------------------------------------------------

    path: Path
    family: Family
    names: tuple[str, ...]
    input: ModelInput
    head: HeadLayout | None = None
    device_decoder: DeviceDecoder | None = None
    on_device: RunsOnDevice | None = None
    """The backend, where it runs on a torch device (None elsewhere)."""

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def torch_device(self) -> Any:
        """The torch device the model runs on, None on other backends."""
        return self.on_device.torch_device if self.on_device is not None else None

    def load(self) -> Model:
        """Loads the model on its backend (once, whoever asks first) and reads its head,
        names and input conventions. Raises ConfigError for what the config got wrong."""
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True
        return self

    def _load(self) -> None:
        cfg = self.config
        self.path = resolve_model(cfg.model)
        check_onnx(self.path)
        backend = self.backend = load_backend(
            str(self.path),
            self.node,
            cfg.backend,
            cfg.max_batch,
            head=self._head_in_model,
            workers=cfg.workers,
            rect=cfg.rect,
        )
        info = backend.info
        width, height = self._input_size(info)
        self.family = self._family(info.output_shape, info.metadata, width, height)
        self.names = class_names(info.metadata, cfg.names_file)
        self.head = backend.head if isinstance(backend, DecodesInModel) else None
        self.on_device = backend if isinstance(backend, RunsOnDevice) else None
        self.device_decoder = self._device_decoder(backend, width, height)
        conv = conventions(self.family)
        self.input = ModelInput(
            width, height, conv.color, conv.scale, conv.placement, info.input_dtype,
            self._rect(backend),
        )  # fmt: skip
        log.info(
            "%s: %s (%s, %dx%d, max_batch %d) on %s",
            self.node,
            self.path.name,
            self.family.value,
            width,
            height,
            cfg.max_batch,
            backend.device,
        )

    def _rect(self, backend: Backend) -> bool:
        """Whether inputs of other sizes go to the model (``rect``); a model that cannot take
        them is a config error, a backend that cannot a warning (the square is used)."""
        if not self.config.rect:
            return False
        if not isinstance(backend, TakesOtherSizes):
            log.warning("%s: rect = true needs the onnxruntime backend; square inputs", self.node)
            return False
        if backend.rect_problem:
            raise ConfigError(
                f"model {self.path.name} cannot take other input sizes: {backend.rect_problem}; "
                "set rect = false",
                key="rect",
            )
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
            log.info("%s: head decoded on the host (rect inputs vary in size)", self.node)
            return None
        width, height = self._input_size(info)
        family = self._family(info.output_shape, info.metadata, width, height)
        return HeadLayout(family, width, height) if family in GRAPH_FAMILIES else None

    def _device_decoder(self, backend: Backend, width: int, height: int) -> DeviceDecoder | None:
        """For torch: the decoder that runs on its device, or None."""
        wanted = self.config.decode_on_device
        device = self.torch_device
        on_gpu = device is not None and device.type != "cpu"
        if self.head is not None or wanted is False or (wanted is None and not on_gpu):
            return None
        why = None
        if self.family not in DeviceDecoder.families:
            why = f"{self.family.value} heads are suppressed in the model already"
        elif self.on_device is None:
            problem = backend.head_problem if isinstance(backend, DecodesInModel) else None
            why = problem or "this backend cannot"
        elif self.suppression is None:
            why = "no nms node follows this one"
        if why:
            if wanted:
                raise ConfigError(why, key="decode_on_device")
            return None
        assert self.suppression is not None
        log.info(
            "%s: head decode and NMS on %s (settings of node '%s')",
            self.node,
            backend.device,
            self.suppression.node,
        )
        # Its fixed-shape part replayed as CUDA graphs of the model's batch sizes, where the
        # model's are (a GPU, not turned off, capture worked).
        graphs = getattr(backend, "graphs", None)
        return DeviceDecoder(
            self.family, width, height, self.names, self.suppression,
            graph_sizes=graphs.sizes if graphs is not None else (),
        )  # fmt: skip

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

    def close(self) -> dict[str, Any]:
        """Releases the backend; returns its last stats."""
        backend, self.backend = self.backend, None
        if backend is None:
            return {}
        stats = backend.stats()
        backend.close()
        return stats
