"""Letterbox, colour order, scaling, mean/std and HWC->CHW: the model's input tensor per frame.

The model's conventions come from the model this node is bound to (its infer node's, found
downstream once when the graph is built); any of them can be set here instead.
``backend = "numpy"`` is OpenCV + numpy;
``backend = "opencl"`` runs one kernel that gives the same tensor bit for bit, and falls back
to numpy, with a warning, where no OpenCL device works. ``backend = "torch"`` does the same
arithmetic in torch on the device of a torch infer node, and hands it the batch there.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Literal

import cv2
import numpy as np
from pydantic import Field

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.geometry import Letterbox
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, ParallelConfig, StageContext
from vapipe.stages.model_input import (
    RECT_STRIDE,
    InputModel,
    LoadedModel,
    ModelInput,
    letterbox_for,
    rect_size,
)
from vapipe.stages.preprocess.cl_kernel import LetterboxProgram, TensorSpec

log = logging.getLogger(__name__)


class PreprocessConfig(ParallelConfig):
    """Where the work runs; every tensor convention defaults to the model's."""

    backend: Literal["numpy", "opencl", "torch", "auto"] = "numpy"
    """Where the work runs: ``numpy`` (OpenCV on the CPU), ``opencl`` (one kernel),
    ``torch`` (on the GPU where the model runs on torch: the tensor never comes back to
    the host) or ``auto``: torch where the model runs on torch on a GPU, else OpenCL on a
    GPU whose kernel builds, else numpy. Every backend makes the same tensor, bit for bit."""
    device: Literal["auto", "gpu", "cpu"] = "auto"
    """OpenCL device kind: ``auto`` takes a GPU when there is one."""
    platform: str | None = None
    """Part of the OpenCL platform name to use (``AMD``, ``NVIDIA``, ``Intel``, ``Portable``)."""
    in_flight: int = Field(2, ge=1, le=8)
    """OpenCL and torch: batches enqueued before the first is collected, so transfers overlap
    kernels."""
    yuv_input: bool = True
    """OpenCL and torch: upload decoded 4:2:0 frames as they are (I420, half the bytes of BGR) and
    convert colours in the kernel, with OpenCV's BT.601 arithmetic, as every other path does;
    ``false`` uploads the BGR image made on the host (the same pixels). Frames that are not
    plain yuv420p (full range, BT.709 or wider colour, odd sizes, rotated) come as BGR on
    every path."""
    graphs: bool = True
    """torch on a GPU: a batch of pictures decoded on the GPU (``hwaccel``) is letterboxed by
    one CUDA graph per batch size, captured the first time the size comes, in one call
    instead of some twenty (``false``: op by op; the same pixels either way)."""
    input_size: list[int] | None = Field(None, min_length=2, max_length=2)
    """``[width, height]``; default: the model's input size."""
    placement: Literal["auto", "center", "top-left"] = "auto"
    """Where the resized picture sits in the input; ``auto`` follows the model family."""
    color: Literal["auto", "rgb", "bgr"] = "auto"
    """Channel order of the tensor; ``auto`` follows the model family."""
    scale: float | None = None
    """Multiplier applied to 0-255 pixels (1/255 for Ultralytics, 1 for YOLOX)."""
    mean: list[float] | None = Field(None, min_length=3, max_length=3)
    """Subtracted after scaling, per channel in tensor order."""
    std: list[float] | None = Field(None, min_length=3, max_length=3)
    """Divided by after the mean, per channel in tensor order."""
    pad_value: int = Field(114, ge=0, le=255)
    """Grey level of the letterbox border."""


@register("preprocess")
class PreprocessStage(BatchStage):
    """Letterboxes each frame into the model's input tensor (numpy, or one OpenCL kernel)."""

    Config = PreprocessConfig
    config: PreprocessConfig
    binds = "downstream"
    bound: InputModel | None = None
    """The model whose input this node makes (its infer node's)."""
    opencl: Any = None
    front: Any = None
    """The OpenCL or torch front end (submit / result); None on numpy."""
    device_name: str | None = None

    def bind(self, shared: object | None) -> None:
        if shared is not None and not isinstance(shared, InputModel):
            raise ConfigError(f"the node after it shares a {type(shared).__name__}, not a model")
        self.bound = shared

    def open(self, context: StageContext) -> None:
        cfg = self.config
        bound = self.bound.load() if self.bound is not None else None
        model: ModelInput | None = bound.input if bound else None
        # OpenCL takes what is queued, up to the model's batch, into one buffer; it never
        # waits for more. The numpy path works frame by frame (in `workers` threads).
        self.backend, probed = self._chosen_backend(bound)
        self.max_batch = bound.max_batch if bound and self.backend != "numpy" else 1
        self.batch_timeout_s = 0.0
        if model is None:
            if (
                cfg.input_size is None
                or cfg.scale is None
                or cfg.placement == "auto"
                or cfg.color == "auto"
            ):
                raise ConfigError(
                    "no infer node downstream to take the input conventions from; set "
                    "input_size, placement, color and scale",
                    key="input_size",
                )
            width, height = cfg.input_size
            model = ModelInput(
                width, height, cfg.color, cfg.scale, cfg.placement, np.dtype(np.float32)
            )
        self.width, self.height = cfg.input_size or (model.width, model.height)
        self.placement = model.placement if cfg.placement == "auto" else cfg.placement
        self.color = model.color if cfg.color == "auto" else cfg.color
        self.scale = cfg.scale if cfg.scale is not None else model.scale
        self.dtype = np.dtype(model.dtype)
        self.rect = model.rect
        self.pad_value = cfg.pad_value
        self.mean = np.asarray(cfg.mean, np.float32).reshape(3, 1, 1) if cfg.mean else None
        self.std = np.asarray(cfg.std, np.float32).reshape(3, 1, 1) if cfg.std else None
        # With infer.interval, the frames its detector will skip are known here: they get no
        # tensor (on 16 cameras at interval 3, two of every three letterboxes were wasted).
        self.schedule = bound.schedule if bound is not None and bound.schedule.active else None
        self.release_pixels = not context.pixels_read_after
        self.opencl = None
        self.front = None
        self._in_flight: deque[tuple[list[Frame], Any]] = deque()
        self.device_name = "numpy"
        if self.backend == "opencl":
            self._open_opencl(probed)
        elif self.backend == "torch":
            self._open_torch(bound)
        chosen = self.backend
        if self.front is not None and cfg.workers > 1:
            log.info("%s: the %s backend overlaps frames itself; workers = 1", self.name, chosen)
        if self.rect and self.front is not None:
            log.warning("%s: %s makes square inputs; rect applies to numpy", self.name, chosen)
        log.debug(
            "%s: %dx%d %s %s scale %g on %s",
            self.name,
            self.width,
            self.height,
            self.placement,
            self.color,
            self.scale,
            self.device_name,
        )

    def _chosen_backend(self, model: LoadedModel | None) -> tuple[str, LetterboxProgram | None]:
        """The backend ``auto`` stands for here (the others stand for themselves), and the
        program its OpenCL probe built: a second build would miss the program cache (its key
        is the context, and OpenCLLetterbox would make a new one)."""
        wanted = self.config.backend
        if wanted != "auto":
            return wanted, None
        device = model.torch_device if model is not None else None
        probed = None
        if device is not None and device.type != "cpu":
            chosen = "torch"
        else:
            dtype = np.dtype(model.input.dtype) if model else np.dtype(np.float32)
            probed = _opencl_gpu_program(dtype)
            chosen = "opencl" if probed is not None else "numpy"
        log.info('%s: backend = "auto" picks %s', self.name, chosen)
        return chosen, probed

    def _spec(self) -> TensorSpec:
        cfg = self.config
        return TensorSpec(
            self.width,
            self.height,
            self.placement,
            self.color == "rgb",
            float(self.scale),
            tuple(cfg.mean) if cfg.mean else (0.0, 0.0, 0.0),
            tuple(cfg.std) if cfg.std else (1.0, 1.0, 1.0),
            self.pad_value,
            self.dtype,
        )

    def _open_opencl(self, probed: LetterboxProgram | None) -> None:
        from vapipe.stages.cl_program import OpenCLUnavailable
        from vapipe.stages.preprocess.opencl import OpenCLLetterbox

        cfg = self.config
        try:
            self.opencl = OpenCLLetterbox(
                self._spec(),
                # auto's probe found a GPU: a build for another output type asks for one too
                device=cfg.device if probed is None else "gpu",
                platform=cfg.platform,
                depth=cfg.in_flight,
                max_batch=self.max_batch,
                program=probed,
            )
        except OpenCLUnavailable as exc:
            log.warning("%s: OpenCL unavailable (%s); using the numpy backend", self.name, exc)
            return
        self.front = self.opencl
        self.device_name = "opencl: " + self.opencl.program.describe()
        log.info("%s: OpenCL preprocessing on %s", self.name, self.device_name)

    def _open_torch(self, model: LoadedModel | None) -> None:
        from vapipe.stages.preprocess.torch_letterbox import TorchLetterbox

        device = model.torch_device if model is not None else None
        if device is None:
            backend = model.backend if model is not None else None
            log.warning(
                '%s: backend = "torch" needs a model on the torch backend (found %s); using '
                "the numpy backend",
                self.name,
                backend.device if backend is not None else "none",
            )
            return
        import torch  # the model's torch backend has imported it already

        self.front = TorchLetterbox(
            self._spec(),
            torch,
            device,
            depth=self.config.in_flight,
            max_batch=self.max_batch,
            graphs=self.config.graphs,
        )
        self.device_name = self.front.describe()
        log.info("%s: preprocessing on %s, where the model runs", self.name, self.device_name)

    @property
    def workers(self) -> int:
        # A device front end overlaps batches itself; numpy (also where one fell back) uses
        # the configured threads.
        return 1 if self.front is not None else self.config.workers

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        if self.schedule is not None:
            for frame in frames:
                if not frame.predicted:
                    frame.predicted = not self.schedule.due(frame)
                    frame.scheduled = True
        # Frames the detector skips (the interval's, or still ones a motion node flagged)
        # need no tensor.
        wanted = [frame for frame in frames if not frame.predicted]
        if self.front is None:
            for frame in frames:
                if not frame.predicted:
                    frame.tensor, frame.letterbox = self.tensor(frame.image)
                self._let_go(frame)
            return frames
        as_yuv = self.config.yuv_input
        pending = None
        if wanted:
            # Planes still in the decoder are copied once, straight into the front's staging.
            pictures = [f.i420() if as_yuv else None for f in wanted]
            pending = self.front.submit(
                [p if p is not None else f.image for p, f in zip(pictures, wanted, strict=True)]
            )
        self._in_flight.append((frames, pending))
        if len(self._in_flight) < self.config.in_flight:
            return []
        return self._collect()

    def handle_message(self, message: Any) -> list[Any]:
        return [*self.flush(), message]  # frames in flight go first: order is kept

    def flush(self) -> list[Frame]:
        if self.front is None:
            return []
        return [frame for _ in range(len(self._in_flight)) for frame in self._collect()]

    def _collect(self) -> list[Frame]:
        """The oldest batch in flight: each frame's tensor is a view of one batch array, so
        the infer node takes the batch as it is, without stacking."""
        frames, pending = self._in_flight.popleft()
        if pending is not None:
            batch = self.front.result(pending)
            wanted = [frame for frame in frames if not frame.predicted]
            for index, frame in enumerate(wanted):
                frame.tensor = batch[index]
                frame.letterbox = pending.letterboxes[index]
        for frame in frames:
            self._let_go(frame)
        return frames

    def _let_go(self, frame: Frame) -> None:
        """Drop the frame's pixels once its model input is made, if nothing later reads them."""
        if self.release_pixels:
            frame.image, frame.yuv = shape_only(frame.shape), None

    def stats(self) -> dict[str, Any]:
        graphs = getattr(self.front, "graphs", None)
        return {"device": self.device_name, **(graphs.stats() if graphs is not None else {})}

    def tensor(self, image: np.ndarray) -> tuple[np.ndarray, Letterbox]:
        """The CHW tensor for one BGR image, and where the image went in it."""
        frame_h, frame_w = image.shape[:2]
        width, height = self.width, self.height
        if self.rect:
            width, height = rect_size(frame_w, frame_h, width, height, self.placement, RECT_STRIDE)
        box = letterbox_for(frame_w, frame_h, width, height, self.placement)
        canvas = np.full((height, width, 3), self.pad_value, np.uint8)
        resized = image
        if (box.resized_w, box.resized_h) != (frame_w, frame_h):
            resized = cv2.resize(
                image, (box.resized_w, box.resized_h), interpolation=cv2.INTER_LINEAR
            )
        canvas[box.pad_y : box.pad_y + box.resized_h, box.pad_x : box.pad_x + box.resized_w] = (
            resized
        )
        if self.color == "rgb":
            canvas = canvas[:, :, ::-1]
        chw = canvas.transpose(2, 0, 1).astype(np.float32)
        if self.scale != 1.0:
            chw *= np.float32(self.scale)
        if self.mean is not None:
            chw -= self.mean
        if self.std is not None:
            chw /= self.std
        return np.ascontiguousarray(chw, dtype=self.dtype), box


def _opencl_gpu_program(dtype: np.dtype) -> LetterboxProgram | None:
    """The letterbox kernel built on an OpenCL GPU device here, None where none builds it
    (``auto``'s second choice: a CPU runtime is no faster than numpy)."""
    from vapipe.stages.cl_program import OpenCLUnavailable
    from vapipe.stages.preprocess.cl_kernel import open_program

    try:
        return open_program("gpu", None, dtype)
    except OpenCLUnavailable:
        return None


def shape_only(shape: tuple[int, ...]) -> np.ndarray:
    """A uint8 array of this shape that holds no pixels (read-only zeros): for stages that
    only ask a frame its size."""
    return np.broadcast_to(np.zeros((), np.uint8), shape)
