"""The OpenCL letterbox kernel: device choice, and the program (built once per device and
dtype) that resizes, pads, converts colours and writes model tensors for a batch of frames.
``opencl.py`` feeds it frame by frame."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import numpy as np

from vapipe.pipeline.geometry import Letterbox
from vapipe.stages.model_input import Placement, letterbox_for
from vapipe.stages.preprocess.resize_tables import tables

log = logging.getLogger(__name__)


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL device, or the program would not build."""


def pyopencl_module() -> Any:
    try:
        import pyopencl
    except ImportError as exc:
        raise OpenCLUnavailable(f"pyopencl is not importable ({exc})") from None
    return pyopencl


def list_devices() -> list[tuple[str, Any]]:
    """(platform name, device) for every device of every platform; [] without OpenCL."""
    cl = pyopencl_module()
    found: list[tuple[str, Any]] = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    for platform in platforms:
        try:
            found.extend((platform.name, device) for device in platform.get_devices())
        except cl.Error:
            continue
    return found


def select_device(kind: str = "auto", platform: str | None = None) -> Any:
    """``kind``: auto (a GPU if there is one, else anything), gpu, or cpu; ``platform``: a
    case-insensitive part of the platform name."""
    return candidate_devices(kind, platform)[0]


def candidate_devices(kind: str = "auto", platform: str | None = None) -> list[Any]:
    """The devices ``kind`` and ``platform`` allow, most wanted first (GPUs before the rest
    for ``auto``); raises OpenCLUnavailable where there is none."""
    cl = pyopencl_module()
    candidates = [
        (name, dev)
        for name, dev in list_devices()
        if platform is None or platform.lower() in name.lower()
    ]
    if not candidates:
        where = f" on a platform matching '{platform}'" if platform else ""
        raise OpenCLUnavailable(f"no OpenCL device{where}")
    wanted = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU}.get(kind)
    if wanted is not None:
        matches = [c for c in candidates if c[1].type & wanted]
        if not matches:
            raise OpenCLUnavailable(
                f"no OpenCL {kind.upper()} device (found: "
                f"{', '.join(d.name.strip() for _, d in candidates)})"
            )
        return [device for _, device in matches]
    gpus = [c for c in candidates if c[1].type & cl.device_type.GPU]
    return [device for _, device in gpus + [c for c in candidates if c not in gpus]]


def open_program(kind: str, platform: str | None, dtype: np.dtype) -> LetterboxProgram:
    """The letterbox program on the first allowed device whose kernel builds.

    A runtime can list a device and still fail to build for it (a CPU runtime whose LLVM
    does not know this processor, say): that device is passed over, so ``auto`` never picks
    a device it cannot use. One warning line names what was passed over when another device
    is used; where none builds, the error names each (the caller warns once)."""
    failures = []
    for device in candidate_devices(kind, platform):
        try:
            program = LetterboxProgram(device, dtype)
        except OpenCLUnavailable as exc:
            failures.append(f"{device.name.strip()}: {exc}")
            continue
        if failures:
            log.warning("OpenCL device passed over: %s", "; ".join(failures))
        return program
    raise OpenCLUnavailable("; ".join(failures))


def one_line(error: Exception, limit: int = 200) -> str:
    """An OpenCL error in one line: a failed build's text carries the whole build log, whose
    first ``error`` line is the reason (after a "Build on <device>" header)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    # pyopencl repeats its message once per device it tried: "X - X - X".
    head = " - ".join(dict.fromkeys(lines[0].split(" - ")))
    reason = next((line for line in lines[1:] if "error" in line.lower()), None)
    text = f"{head} / {reason}" if reason else head
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kernel_source(package: str, name: str) -> str:
    """An OpenCL program's text: the shared I420 helper, then ``kernels/NAME`` of
    ``package``."""
    shared = files("vapipe.stages.preprocess").joinpath("kernels/i420.cl")
    own = files(package).joinpath(f"kernels/{name}")
    return shared.read_text(encoding="utf-8") + "\n" + own.read_text(encoding="utf-8")


def _source() -> str:
    return kernel_source("vapipe.stages.preprocess", "letterbox.cl")


_programs: dict[tuple[int, str], Any] = {}
_programs_lock = threading.Lock()


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
        options = ["-DOUT_HALF", "-DOUT_T=half"] if self.dtype == np.float16 else ["-DOUT_T=float"]
        if device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            options.append("-cl-fp32-correctly-rounded-divide-sqrt")
        key = (self.context.int_ptr, " ".join(options))
        with _programs_lock:
            program = _programs.get(key)
            if program is None:
                try:
                    # A compiler that reports progress ("Compilation started", Intel's CPU
                    # runtime) makes pyopencl warn on every build: noise, not a fault.
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", cl.CompilerWarning)
                        program = cl.Program(self.context, _source()).build(options=options)
                except cl.Error as exc:
                    raise OpenCLUnavailable(
                        f"letterbox kernel did not build: {one_line(exc)}"
                    ) from None
                _programs[key] = program
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
