"""Object crops on an OpenCL device: the frames that have crops uploaded once per batch (as
decoded, I420, or BGR), and one kernel (``kernels/crops.cl``) that cuts, resizes, pads and
normalises every crop of the batch into the model's input, in its layout.

The same input as the numpy path (``crops.cut`` / ``cut_i420``, then ``Normalise``) within
one level of a pixel, the letterbox kernel's tolerance.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from vapipe.pipeline.frame import Picture, contiguous, copy_picture
from vapipe.stages.cl_program import (
    OpenCLUnavailable,
    build_options,
    built_program,
    first_building,
    kernel_source,
    one_line,
    pyopencl_module,
)
from vapipe.stages.crops.warp import PAD, Normalise, Window

log = logging.getLogger(__name__)


class CropProgram:
    """The crop kernel built on the first allowed device where it builds."""

    def __init__(self, kind: str = "auto", platform: str | None = None) -> None:
        self.cl = pyopencl_module()
        self.device = first_building(kind, platform, self._on)

    def _on(self, device: Any) -> Any:
        self._build(device)
        return device

    def _build(self, device: Any) -> None:
        cl = self.cl
        try:
            self.context = cl.Context([device])
            options = build_options(cl, device)
            source = lambda: kernel_source("vapipe.stages.crops", "crops.cl")  # noqa: E731
            program = built_program(cl, self.context, "crop", source, options)
            self.kernel = cl.Kernel(program, "crops")
            self.queue = cl.CommandQueue(self.context)
        except cl.Error as exc:
            raise OpenCLUnavailable(f"crop kernel did not build: {one_line(exc)}") from None

    def describe(self) -> str:
        return f"{self.device.platform.name.strip()} / {self.device.name.strip()}"


class OpenCLCrops:
    """``inputs(pictures, crops)``: the model's input for crops of a batch's frames."""

    def __init__(
        self,
        size: tuple[int, int],
        normalise: Normalise,
        channels_last: bool,
        program: CropProgram,
    ) -> None:
        self.size = size
        self.normalise = normalise
        self.channels_last = channels_last
        self.program = program
        self._src: Any = None
        self._src_bytes = 0
        self._out: Any = None
        self._out_bytes = 0

    def _buffer(self, which: str, nbytes: int, flags: int) -> Any:
        """A device buffer of at least ``nbytes``, grown (doubled) as batches need."""
        held, held_bytes = getattr(self, f"_{which}"), getattr(self, f"_{which}_bytes")
        if held is None or held_bytes < nbytes:
            held_bytes = max(nbytes, 2 * held_bytes)
            held = self.program.cl.Buffer(self.program.context, flags, held_bytes)
            setattr(self, f"_{which}", held)
            setattr(self, f"_{which}_bytes", held_bytes)
        return held

    def inputs(
        self,
        pictures: Sequence[Picture],
        crops: Sequence[tuple[int, np.ndarray, Window | None]],
    ) -> np.ndarray:
        """N x C x H x W (or N x H x W x C) float32: for each crop (index in ``pictures``,
        frame -> input matrix, window or None), its warp of that picture, normalised.
        ``pictures``: BGR (h, w, 3) or I420 planes (h * 3 / 2, w)."""
        cl = self.program.cl
        mf = cl.mem_flags
        queue = self.program.queue
        frames = [contiguous(picture) for picture in pictures]
        starts = np.cumsum([0] + [frame.nbytes for frame in frames])
        src = self._buffer("src", int(starts[-1]), mf.READ_ONLY)
        hosts = []  # alive until the blocking download below: the copies read them
        for frame, start in zip(frames, starts.tolist(), strict=False):
            host = frame
            if not isinstance(frame, np.ndarray):  # decoder planes: gathered into one array
                host = np.empty(frame.nbytes, np.uint8)
                copy_picture(frame, host)
            hosts.append(host)
            cl.enqueue_copy(queue, src, host, dst_offset=start, is_blocking=False)
        count = len(crops)
        width, height = self.size
        offsets = np.empty(count, np.uint64)
        shapes = np.empty((count, 3), np.int32)
        inverse = np.empty((count, 6), np.float32)
        windows = np.empty((count, 4), np.int32)
        for n, (index, matrix, window) in enumerate(crops):
            frame = frames[index]
            i420 = len(frame.shape) == 2
            offsets[n] = starts[index]
            shapes[n] = (frame.shape[1], frame.shape[0] * 2 // 3 if i420 else frame.shape[0], i420)
            inverse[n] = cv2.invertAffineTransform(matrix).reshape(-1)
            windows[n] = window if window is not None else (0, 0, width, height)
        flags = mf.READ_ONLY | mf.COPY_HOST_PTR
        context = self.program.context
        tables = [cl.Buffer(context, flags, hostbuf=a) for a in (offsets, shapes, inverse, windows)]
        result = np.empty(
            (count, height, width, 3) if self.channels_last else (count, 3, height, width),
            np.float32,
        )
        out = self._buffer("out", result.nbytes, mf.WRITE_ONLY)
        norm = self.normalise
        f32, i32 = np.float32, np.int32
        self.program.kernel.set_args(
            src, *tables, i32(width), i32(height), out, i32(int(self.channels_last)),
            i32(int(norm.color == "rgb")), f32(norm.scale), *map(f32, norm.mean),
            *map(f32, norm.std), i32(PAD),
        )  # fmt: skip
        done = cl.enqueue_nd_range_kernel(queue, self.program.kernel, (width, height, count), None)
        cl.enqueue_copy(queue, result, out, wait_for=[done], is_blocking=True)
        del hosts
        return result


def open_crops(
    wanted: str, size: tuple[int, int], normalise: Normalise, channels_last: bool, node: str
) -> OpenCLCrops | None:
    """The OpenCL crop front end a node's ``crops`` asks for, or None for numpy: ``opencl``
    takes a GPU where there is one, else any device, and warns where none works; ``auto``
    takes only a GPU, and says in the log what it picked."""
    if wanted == "numpy":
        return None
    try:
        program = CropProgram("gpu" if wanted == "auto" else "auto")
    except OpenCLUnavailable as exc:
        if wanted == "opencl":
            log.warning("%s: OpenCL unavailable for crops (%s); cutting them with numpy", node, exc)
        else:
            log.info('%s: crops = "auto" picks numpy (no OpenCL GPU: %s)', node, exc)
        return None
    log.info("%s: crops cut by one OpenCL kernel on %s", node, program.describe())
    return OpenCLCrops(size, normalise, channels_last, program)
