"""The OpenCL letterbox kernel: the program (built once per device and dtype, through
stages/cl_program.py) that resizes, pads, converts colours and writes model tensors for a
batch of frames. ``opencl.py`` feeds it frame by frame."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.pipeline.geometry import Letterbox
from vapipe.stages.cl_program import (
    build_options,
    built_program,
    first_building,
    kernel_source,
    pyopencl_module,
)
from vapipe.stages.model_input import Placement, letterbox_for
from vapipe.stages.preprocess.resize_tables import tables

log = logging.getLogger(__name__)


def open_program(kind: str, platform: str | None, dtype: np.dtype) -> LetterboxProgram:
    """The letterbox program on the first allowed device whose kernel builds
    (``cl_program.first_building``)."""
    return first_building(kind, platform, lambda device: LetterboxProgram(device, dtype))


def _source() -> str:
    return kernel_source("vapipe.stages.preprocess", "letterbox.cl")


@dataclass(frozen=True)
class TensorSpec:
    """The tensor the kernel writes: its size, where the picture goes, channel order, scaling."""

    width: int
    height: int
    placement: Placement
    swap_rb: bool
    scale: float
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    pad_value: int = 114
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))


class LetterboxProgram:
    """The built kernel for one device and output type, and how to launch it."""

    def __init__(self, device: Any, dtype: np.dtype) -> None:
        cl = pyopencl_module()
        self.cl = cl
        self.device = device
        self.context = cl.Context([device])
        self.dtype = np.dtype(dtype)
        half = ("-DOUT_HALF", "-DOUT_T=half") if self.dtype == np.float16 else ("-DOUT_T=float",)
        options = build_options(cl, device, *half)
        program = built_program(cl, self.context, "letterbox", _source, options)
        self.kernel = cl.Kernel(program, "letterbox")
        self.multiple = self.kernel.get_work_group_info(
            cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device
        )
        limit = min(
            device.max_work_group_size,
            self.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device),
        )
        rows = max(1, min(4, limit // max(self.multiple, 1)))
        self.local = (min(self.multiple, limit), rows, 1)
        self.unified = bool(getattr(device, "host_unified_memory", False)) or bool(
            device.type & cl.device_type.CPU
        )
        self._tables: dict[tuple[int, int, int, int], tuple[Any, ...]] = {}

    def describe(self) -> str:
        return (
            f"{self.device.platform.name.strip()} / {self.device.name.strip()} "
            f"(work-group {self.local[0]}x{self.local[1]}, multiple {self.multiple}"
            f"{', unified memory' if self.unified else ''})"
        )

    def table_buffers(self, src_w: int, src_h: int, box: Letterbox) -> tuple[Any, ...]:
        key = (src_w, src_h, box.resized_w, box.resized_h)
        found = self._tables.get(key)
        if found is None:
            cols, rows = tables(*key)
            flags = self.cl.mem_flags.READ_ONLY | self.cl.mem_flags.COPY_HOST_PTR
            found = tuple(
                self.cl.Buffer(self.context, flags, hostbuf=np.ascontiguousarray(a))
                for a in (cols.offsets, cols.weights, rows.offsets, rows.weights)
            )
            self._tables[key] = found
        return found

    def launch(
        self,
        queue: Any,
        src: Any,
        src_shape: tuple[int, int],
        batch: int,
        conv: TensorSpec,
        out: Any,
        out_index: int = 0,
        wait_for: Sequence[Any] | None = None,
        src_offset: int = 0,
        i420: bool = False,
    ) -> tuple[Any, Letterbox]:
        """Enqueue the kernel for ``batch`` frames of ``src_shape`` (h, w) packed in ``src``
        from byte ``src_offset`` (BGR, or I420 planes with ``i420``), writing frames
        ``out_index``.. of ``out``. Returns (event, letterbox)."""
        src_h, src_w = src_shape
        box = letterbox_for(src_w, src_h, conv.width, conv.height, conv.placement)
        xofs, alpha, yofs, beta = self.table_buffers(src_w, src_h, box)
        local = self.local
        global_size = (
            -(-conv.width // local[0]) * local[0],
            -(-conv.height // local[1]) * local[1],
            batch,
        )
        i32, f32 = np.int32, np.float32
        self.kernel.set_args(
            src,
            np.uint64(src_offset),
            i32(src_w if i420 else src_w * 3),
            i32(src_w * src_h * 3 // 2 if i420 else src_w * src_h * 3),
            i32(src_w),
            i32(src_h),
            xofs,
            alpha,
            yofs,
            beta,
            i32(box.resized_w),
            i32(box.resized_h),
            i32(box.pad_x),
            i32(box.pad_y),
            i32(conv.width),
            i32(conv.height),
            i32(out_index * 3 * conv.width * conv.height),
            out,
            i32(int(conv.swap_rb)),
            f32(conv.scale),
            *map(f32, conv.mean),
            *map(f32, conv.std),
            i32(conv.pad_value),
            i32(int(i420)),
        )
        event = self.cl.enqueue_nd_range_kernel(
            queue, self.kernel, global_size, local, wait_for=wait_for
        )
        return event, box
