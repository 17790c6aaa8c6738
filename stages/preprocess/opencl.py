"""The OpenCL letterbox front end: pinned staging and overlap.

``OpenCLLetterbox`` feeds the kernel (cl_kernel.py) frame by frame through a ring of slots,
so that the upload of the next frame overlaps the kernel of this one (separate upload,
compute and download queues linked by events). On devices that share host memory
(integrated GPUs, CPU devices) nothing is copied: the kernel reads the frame where the host
wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.pipeline.frame import Picture, contiguous, copy_picture
from vapipe.pipeline.geometry import Letterbox
from vapipe.stages.cl_program import OpenCLUnavailable, pyopencl_module
from vapipe.stages.preprocess.cl_kernel import LetterboxProgram, TensorSpec, open_program

_UNMAPPED = np.empty(0, np.uint8)


@dataclass
class _Slot:
    # Pinned and mapped on discrete devices; empty where the device shares host memory.
    host_in: np.ndarray = field(default_factory=lambda: _UNMAPPED)
    pinned_in: Any = None
    device_in: Any = None
    in_bytes: int = 0
    host_out: np.ndarray = field(default_factory=lambda: _UNMAPPED)
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
        program: LetterboxProgram | None = None,
    ) -> None:
        """``program``: one already built for this output type (``auto``'s probe), used
        instead of building again."""
        cl = pyopencl_module()
        self.cl = cl
        self.conv = conv
        self.max_batch = max_batch
        try:
            if program is None or program.dtype != np.dtype(conv.dtype):
                program = open_program(device, platform, conv.dtype)
            self.program = program
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
            slot.device_in, slot.host_in = slot.pinned_in, _UNMAPPED
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

    def submit(self, images: Sequence[Picture]) -> Pending:
        """Enqueue up to ``max_batch`` frames (any sizes): BGR (h, w, 3), or I420 planes
        (h * 3 / 2, w) as a 2-D array or as the decoder's planes, converted in the kernel.
        Returns at once. Each submitted batch must be collected with ``result`` before
        ``depth`` more are submitted."""
        if not 1 <= len(images) <= self.max_batch:
            raise ValueError(f"submit takes 1 to {self.max_batch} frames, got {len(images)}")
        cl = self.cl
        slot = self.slots[self._next]
        self._next = (self._next + 1) % len(self.slots)
        if slot.done is not None:
            slot.done.wait()
        frames = [contiguous(image) for image in images]
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
                copy_picture(frame, mapped[start : start + frame.nbytes])
            mapped.base.release(queue=self.upload_q)
            uploaded = cl.enqueue_marker(self.upload_q)
        else:
            for frame, start in zip(frames, offsets, strict=False):
                copy_picture(frame, slot.host_in[start : start + frame.nbytes])
            uploaded = cl.enqueue_copy(
                self.upload_q, slot.device_in, slot.host_in[: offsets[-1]], is_blocking=False
            )
        events, boxes = [], []
        for first, count in same_shape_runs(frames):
            frame = frames[first]
            i420 = len(frame.shape) == 2
            shape = (frame.shape[0] * 2 // 3, frame.shape[1]) if i420 else frame.shape[:2]
            # One launch per run of same-sized frames (packed back to back): the launch, not
            # the kernel, was the per-frame cost the host paid with 16 streams.
            event, box = self.program.launch(
                self.compute_q,
                slot.device_in,
                shape,
                count,
                self.conv,
                slot.device_out,
                out_index=first,
                wait_for=[uploaded],
                src_offset=offsets[first],
                i420=i420,
            )
            events.append(event)
            boxes.extend([box] * count)
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


def same_shape_runs(
    frames: Sequence[Picture], kind: Callable[[Picture], Hashable] = lambda frame: frame.shape
) -> list[tuple[int, int]]:
    """(first index, count) of each run of consecutive frames of one ``kind`` (by default one
    shape, and so one layout: I420 planes are 2-D, BGR 3-D), in order."""
    runs: list[tuple[int, int]] = []
    kinds = [kind(frame) for frame in frames]
    for index, this in enumerate(kinds):
        if runs and kinds[runs[-1][0]] == this:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    return runs
