"""The OpenCL letterbox kernel: device choice, program cache, pinned staging, overlap.

``LetterboxProgram`` builds and launches the kernel (for any batch of equally sized frames);
``OpenCLLetterbox`` feeds it frame by frame through a ring of slots, so that the upload of
the next frame overlaps the kernel of this one (separate upload, compute and download queues
linked by events). On devices that share host memory (integrated GPUs, CPU devices) nothing
is copied: the kernel reads the frame where the host wrote it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import numpy as np

from vapipe.stages.preprocess.geometry import Letterbox, letterbox_for
from vapipe.stages.preprocess.resize_tables import tables


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL device, or the program would not build."""


def _cl() -> Any:
    try:
        import pyopencl
    except ImportError as exc:
        raise OpenCLUnavailable(f"pyopencl is not importable ({exc})") from None
    return pyopencl


def list_devices() -> list[tuple[str, Any]]:
    """(platform name, device) for every device of every platform; [] without OpenCL."""
    cl = _cl()
    found = []
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
    cl = _cl()
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
        return matches[0][1]
    gpus = [c for c in candidates if c[1].type & cl.device_type.GPU]
    return (gpus or candidates)[0][1]


def _source() -> str:
    return (
        files("vapipe.stages.preprocess")
        .joinpath("kernels/letterbox.cl")
        .read_text(encoding="utf-8")
    )


_programs: dict[tuple[int, str], Any] = {}
_programs_lock = threading.Lock()


@dataclass(frozen=True)
class TensorSpec:
    """The tensor the kernel writes: its size, where the picture goes, channel order, scaling."""

    width: int
    height: int
    placement: str
    swap_rb: bool
    scale: float
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    pad_value: int = 114
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))


class LetterboxProgram:
    """The built kernel for one device and output type, and how to launch it."""

    def __init__(self, device: Any, dtype: np.dtype) -> None:
        cl = _cl()
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
                    program = cl.Program(self.context, _source()).build(options=options)
                except cl.Error as exc:
                    raise OpenCLUnavailable(f"letterbox kernel did not build: {exc}") from None
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
        box = letterbox_for(src_w, src_h, conv.width, conv.height, conv.placement)  # type: ignore[arg-type]
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


@dataclass
class _Slot:
    host_in: np.ndarray | None = None  # pinned, mapped (discrete devices)
    pinned_in: Any = None
    device_in: Any = None
    in_bytes: int = 0
    host_out: np.ndarray | None = None
    pinned_out: Any = None
    device_out: Any = None
    done: Any = None


@dataclass
class Pending:
    slot: _Slot
    event: Any
    letterboxes: list[Letterbox]


class OpenCLLetterbox:
    """Front end for whole frames: ``submit`` enqueues up to ``max_batch`` frames, which the
    kernel writes straight into one batch buffer at their index; ``result`` waits for them
    and returns the batch (frames, 3, height, width). A ring of ``depth`` slots keeps the next
    upload overlapping this kernel."""

    def __init__(
        self,
        conv: TensorSpec,
        *,
        device: str = "auto",
        platform: str | None = None,
        depth: int = 2,
        max_batch: int = 1,
    ) -> None:
        cl = _cl()
        self.cl = cl
        self.conv = conv
        self.max_batch = max_batch
        try:
            self.program = LetterboxProgram(select_device(device, platform), conv.dtype)
            ctx = self.program.context
            self.upload_q = cl.CommandQueue(ctx)
            self.compute_q = cl.CommandQueue(ctx)
            self.download_q = cl.CommandQueue(ctx)
        except cl.Error as exc:
            raise OpenCLUnavailable(str(exc)) from None
        self.frame_shape = (3, conv.height, conv.width)
        self.out_shape = (max_batch, *self.frame_shape)
        self.out_bytes = int(np.prod(self.out_shape)) * conv.dtype.itemsize
        self.slots = [self._make_output(_Slot()) for _ in range(depth)]
        self._next = 0

    def _make_output(self, slot: _Slot) -> _Slot:
        cl, ctx = self.cl, self.program.context
        mf = cl.mem_flags
        slot.pinned_out = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, self.out_bytes)
        if self.program.unified:
            slot.device_out = slot.pinned_out
        else:
            slot.device_out = cl.Buffer(ctx, mf.WRITE_ONLY, self.out_bytes)
            slot.host_out, _ = cl.enqueue_map_buffer(
                self.download_q,
                slot.pinned_out,
                cl.map_flags.READ,
                0,
                self.out_shape,
                self.conv.dtype,
                is_blocking=True,
            )
        return slot

    def _ensure_input(self, slot: _Slot, nbytes: int) -> None:
        if slot.in_bytes >= nbytes:
            return
        cl, ctx = self.cl, self.program.context
        mf = cl.mem_flags
        slot.pinned_in = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, nbytes)
        if self.program.unified:
            slot.device_in, slot.host_in = slot.pinned_in, None
        else:
            slot.device_in = cl.Buffer(ctx, mf.READ_ONLY, nbytes)
            slot.host_in, _ = cl.enqueue_map_buffer(
                self.upload_q,
                slot.pinned_in,
                cl.map_flags.WRITE,
                0,
                (nbytes,),
                np.uint8,
                is_blocking=True,
            )
        slot.in_bytes = nbytes

    def submit(self, images: Sequence[np.ndarray]) -> Pending:
        """Enqueue up to ``max_batch`` frames (any sizes): BGR (h, w, 3), or I420 planes
        (h * 3 / 2, w) as a 2-D array, converted in the kernel. Returns at once. Each submitted
        batch must be collected with ``result`` before ``depth`` more are submitted."""
        if not 1 <= len(images) <= self.max_batch:
            raise ValueError(f"submit takes 1 to {self.max_batch} frames, got {len(images)}")
        cl = self.cl
        slot = self.slots[self._next]
        self._next = (self._next + 1) % len(self.slots)
        if slot.done is not None:
            slot.done.wait()
        frames = [np.ascontiguousarray(image) for image in images]
        offsets = np.cumsum([0] + [frame.nbytes for frame in frames]).tolist()
        self._ensure_input(slot, offsets[-1])
        if self.program.unified:
            mapped, _ = cl.enqueue_map_buffer(
                self.upload_q,
                slot.device_in,
                cl.map_flags.WRITE_INVALIDATE_REGION,
                0,
                (offsets[-1],),
                np.uint8,
                is_blocking=True,
            )
            for frame, start in zip(frames, offsets, strict=False):
                mapped[start : start + frame.nbytes] = frame.reshape(-1)
            mapped.base.release(queue=self.upload_q)
            uploaded = cl.enqueue_marker(self.upload_q)
        else:
            for frame, start in zip(frames, offsets, strict=False):
                slot.host_in[start : start + frame.nbytes] = frame.reshape(-1)
            uploaded = cl.enqueue_copy(
                self.upload_q, slot.device_in, slot.host_in[: offsets[-1]], is_blocking=False
            )
        events, boxes = [], []
        for index, (frame, start) in enumerate(zip(frames, offsets, strict=False)):
            i420 = frame.ndim == 2
            shape = (frame.shape[0] * 2 // 3, frame.shape[1]) if i420 else frame.shape[:2]
            event, box = self.program.launch(
                self.compute_q,
                slot.device_in,
                shape,
                1,
                self.conv,
                slot.device_out,
                out_index=index,
                wait_for=[uploaded],
                src_offset=start,
                i420=i420,
            )
            events.append(event)
            boxes.append(box)
        if self.program.unified:
            slot.done = cl.enqueue_marker(self.compute_q, wait_for=events)
        else:
            slot.done = cl.enqueue_copy(
                self.download_q,
                slot.host_out[: len(frames)],
                slot.device_out,
                wait_for=events,
                is_blocking=False,
            )
        for queue in (self.upload_q, self.compute_q, self.download_q):
            queue.flush()
        return Pending(slot, slot.done, boxes)

    def result(self, pending: Pending) -> np.ndarray:
        """Wait for a submitted batch; returns its tensors (a fresh array, one per frame)."""
        cl = self.cl
        pending.event.wait()
        slot = pending.slot
        count = len(pending.letterboxes)
        if not self.program.unified:
            return slot.host_out[:count].copy()
        mapped, _ = cl.enqueue_map_buffer(
            self.download_q,
            slot.device_out,
            cl.map_flags.READ,
            0,
            (count, *self.frame_shape),
            self.conv.dtype,
            is_blocking=True,
        )
        tensors = mapped.copy()
        mapped.base.release(queue=self.download_q)
        return tensors

    def tensor(self, image: np.ndarray) -> tuple[np.ndarray, Letterbox]:
        """One frame, synchronously."""
        pending = self.submit([image])
        return self.result(pending)[0], pending.letterboxes[0]
