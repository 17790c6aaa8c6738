"""The letterbox on the inference device, in torch: for a torch backend on a GPU.

The OpenCL path hands its batch back to the host, and the torch backend uploads it again: per
1080p frame the host copied the I420 picture into OpenCL's staging (3 MB), the finished
tensor out of it (4.9 MB) and into torch's staging (4.9 MB). Here the I420 picture is copied
once, into page-locked memory, and the tensor is made where the model runs and stays there.

The arithmetic is the OpenCL kernel's (letterbox.cl): OpenCV's BT.601 integer colour
conversion and INTER_LINEAR fixed-point resize, so the tensor equals the numpy path's bit for
bit. Only the taps the resize reads are converted: two source rows per output row and two
columns per output column, gathered before any arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from vapipe.pipeline.device_picture import DeviceNV12
from vapipe.pipeline.frame import Picture, contiguous, copy_picture
from vapipe.pipeline.geometry import Letterbox
from vapipe.stages.lazy_graphs import LazyGraphs
from vapipe.stages.model_input import letterbox_for
from vapipe.stages.preprocess.cl_kernel import TensorSpec
from vapipe.stages.preprocess.opencl import same_shape_runs
from vapipe.stages.preprocess.resize_tables import tables

# OpenCV's COLOR_YUV2BGR_I420 coefficients (20-bit fixed point), as letterbox.cl has them.
_LUMA, _ROUND = 1220542, 1 << 19
_U_B, _V_G, _U_G, _V_R = 2116026, 852492, 409993, 1673527


@dataclass
class _Taps:
    """Where one source size is read for one resized size, on the device."""

    rows: Any  # int64 (2 * resized_h,): top rows, then bottom rows (clamped)
    cols: Any  # int64 (2 * resized_w,): left columns, then right columns (clamped)
    row_weights: Any  # int32 (2 * resized_h, 1): the top rows' weights, then the bottom's
    col_weights: Any  # int32 (2, resized_w)
    yuv: Any  # int64 (3, 2 * resized_h, 2 * resized_w) into a flat YUV picture; None for BGR


@dataclass
class _Slot:
    staging: Any = None  # page-locked uint8 (bytes,) on a GPU; plain host memory elsewhere
    uploaded: Any = None  # the event after its last copy to the device


@dataclass
class Pending:
    batch: Any
    event: Any
    letterboxes: list[Letterbox]
    pictures: tuple[Any, ...] = ()
    """Device pictures read by the batch, held (and their tensors with them) until it is
    finished: their memory is not handed to another picture while this stream may still read
    it."""


class TorchLetterbox:
    """``submit`` copies up to ``max_batch`` frames (BGR (h, w, 3) or I420 (h * 3 / 2, w))
    to ``device`` and enqueues their letterbox on a stream of its own; ``result`` waits for
    it and returns the batch, a (frames, 3, height, width) tensor on the device. A ring of
    ``depth`` staging buffers lets the next frames be copied while these upload."""

    def __init__(
        self,
        conv: TensorSpec,
        torch: Any,
        device: Any,
        *,
        depth: int = 2,
        max_batch: int = 1,
        graphs: bool = True,
    ) -> None:
        self.torch = torch
        self.conv = conv
        self.on_gpu = device.type == "cuda"
        if self.on_gpu and device.index is None:  # "cuda": the one pictures say they are on
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.max_batch = max_batch
        self.stream = torch.cuda.Stream(device=device) if self.on_gpu else None
        self.dtype = torch.float16 if np.dtype(conv.dtype) == np.float16 else torch.float32
        order = [2, 1, 0] if conv.swap_rb else [0, 1, 2]
        self.channels = torch.tensor(order, device=device)
        self.position = [order.index(c) for c in range(3)]  # where blue, green, red go
        self.yuv_offset = torch.tensor([16, 128, 128], dtype=torch.int32, device=device)
        self.yuv_offset = self.yuv_offset.view(1, 3, 1, 1)
        self.luma_round = torch.tensor(_ROUND, dtype=torch.int32, device=device)
        scale = np.float32(conv.scale)
        mean, std = np.asarray(conv.mean, np.float32), np.asarray(conv.std, np.float32)
        # The numpy path's order of operations, in float32: scale, minus mean, divided by std.
        pad = (np.float32(conv.pad_value) * scale - mean) / std
        self.pad = torch.from_numpy(pad.astype(np.float32)).to(device).view(1, 3, 1, 1)
        self.scale = float(scale)
        self.mean = torch.from_numpy(mean).to(device).view(1, 3, 1, 1) if any(mean) else None
        self.std = torch.from_numpy(std).to(device).view(1, 3, 1, 1) if any(std != 1) else None
        # Batches of decoder pictures by one CUDA graph per batch and picture size, each
        # reading the first rows of one input buffer per picture size (an input per graph
        # would hold 1.6 GB of 1080p pictures at 32 sizes).
        self.graphs = (
            LazyGraphs(torch, self.stream, "letterbox") if graphs and self.on_gpu else None
        )
        self._inputs: dict[tuple[int, ...], Any] = {}
        self.slots = [_Slot() for _ in range(depth)]
        self._next = 0
        self._taps: dict[tuple[int, int, int, int, str], _Taps] = {}

    def describe(self) -> str:
        if self.on_gpu:
            return f"torch {self.device} ({self.torch.cuda.get_device_name(self.device)})"
        return f"torch {self.device}"

    def submit(self, images: Sequence[Picture]) -> Pending:
        """Returns at once; each submitted batch must be collected with ``result`` before
        ``depth`` more are submitted."""
        if not 1 <= len(images) <= self.max_batch:
            raise ValueError(f"submit takes 1 to {self.max_batch} frames, got {len(images)}")
        torch = self.torch
        frames = [contiguous(image) for image in images]
        # Pictures a hardware decoder left on the device are read where they are: no staging.
        sizes = [0 if isinstance(frame, DeviceNV12) else frame.nbytes for frame in frames]
        offsets = np.cumsum([0, *sizes]).tolist()
        slot = self.slots[self._next]
        self._next = (self._next + 1) % len(self.slots)
        if offsets[-1]:
            self._stage(slot, frames, offsets)
        with (
            torch.inference_mode(),
            torch.cuda.stream(self.stream) if self.on_gpu else nullcontext(),
        ):
            packed = None
            if offsets[-1]:
                packed = slot.staging[: offsets[-1]].to(self.device, non_blocking=True)
                if self.on_gpu:
                    slot.uploaded = torch.cuda.Event()
                    slot.uploaded.record(self.stream)
            runs = list(same_shape_runs(frames, _place_and_shape))
            if self.graphs is not None and len(runs) == 1 and _layout(frames[0]) == "nv12":
                batch, box = self._graphed(frames)
                return Pending(batch, self._finished(), [box] * len(frames), tuple(frames))
            batch = self._padded(len(frames))
            boxes: list[Letterbox] = []
            on_device: list[Any] = []
            for first, count in runs:
                picture = frames[first]
                shape = picture.shape
                layout, src_h, src_w, box = self._placed(picture)
                if layout == "nv12":
                    source = self._on_device(frames[first : first + count])
                    on_device += frames[first : first + count]
                else:
                    start = offsets[first]
                    size = count * picture.nbytes
                    # Host pictures were staged: packed is the tensor they were uploaded into.
                    source = packed[start : start + size].view(count, *shape)  # type: ignore[index]
                self._letterbox(source, layout, src_h, src_w, box, batch[first : first + count])
                boxes.extend([box] * count)
        return Pending(batch, self._finished(), boxes, tuple(on_device))

    def _placed(self, picture: Picture) -> tuple[str, int, int, Letterbox]:
        """The picture's layout, its height and width, and where it goes in the model input."""
        layout, shape, conv = _layout(picture), picture.shape, self.conv
        src_h, src_w = (shape[0] * 2 // 3, shape[1]) if layout != "bgr" else shape[:2]
        return layout, src_h, src_w, letterbox_for(src_w, src_h, conv.width, conv.height,
                                                   conv.placement)  # fmt: skip

    def _finished(self) -> Any:
        """An event recorded after the work enqueued so far (None on the CPU)."""
        if not self.on_gpu:
            return None
        event = self.torch.cuda.Event()
        event.record(self.stream)
        return event

    def _padded(self, count: int) -> Any:
        """A batch of ``count`` pictures of the pad value, to letterbox into."""
        conv = self.conv
        return self.pad.to(self.dtype).expand(count, 3, conv.height, conv.width).contiguous()

    def _graphed(self, pictures: Sequence[Any]) -> tuple[Any, Letterbox]:
        """A batch of same-sized decoder pictures by the CUDA graph of its size (captured the
        first time), and where each picture went in it."""
        assert self.graphs is not None
        _, src_h, src_w, box = self._placed(pictures[0])

        def letterboxed(source: Any) -> Any:
            out = self._padded(source.shape[0])
            self._letterbox(source, "nv12", src_h, src_w, box, out)
            return out

        torch = self.torch
        tensors = self._readable(pictures)
        count, shape = len(tensors), tuple(tensors[0].shape)

        def make_input() -> Any:
            if shape not in self._inputs:
                self._inputs[shape] = torch.empty(
                    (self.max_batch, *shape), dtype=tensors[0].dtype, device=self.device
                )
            return self._inputs[shape][:count]

        graphed = self.graphs.run(
            (count, *shape),
            lambda static_in: torch.stack(tensors, out=static_in),
            make_input,
            lambda source: (letterboxed(source),),
        )
        if graphed is None:  # graphs turned off: op by op
            return letterboxed(torch.stack(tensors)), box
        return graphed[0], box

    def _stage(self, slot: _Slot, frames: Sequence[Picture], offsets: list[int]) -> None:
        """The host pictures, copied into the slot's page-locked staging."""
        if slot.uploaded is not None:
            slot.uploaded.synchronize()  # its staging may still be on its way to the device
        if slot.staging is None or slot.staging.numel() < offsets[-1]:
            slot.staging = self.torch.empty(
                offsets[-1], dtype=self.torch.uint8, pin_memory=self.on_gpu
            )
        host = slot.staging.numpy()
        for frame, start, end in zip(frames, offsets, offsets[1:], strict=False):
            if end > start:
                copy_picture(frame, host[start:end])

    def _on_device(self, pictures: Sequence[Any]) -> Any:
        """(count, height * 3 / 2, width) NV12 of decoder pictures on the device."""
        return self.torch.stack(self._readable(pictures))

    def _readable(self, pictures: Sequence[Any]) -> list[Any]:
        """The pictures' tensors on the device, once each one's decoder stream has written it
        (``submit`` holds the pictures until the batch is finished, so their memory is not
        reused before this stream has read it)."""
        stream = self.stream
        tensors = []
        for picture in pictures:
            if stream is not None and picture.ready is not None:
                stream.wait_event(picture.ready)
            tensor = picture.tensor
            # A torch call lets go of the interpreter lock and waits to get it back: none
            # for a picture already where it is read.
            tensors.append(tensor if tensor.device == self.device else tensor.to(self.device))
        return tensors

    def result(self, pending: Pending) -> Any:
        """The batch of a submitted ``Pending``, finished (a tensor on the device)."""
        if pending.event is not None:
            pending.event.synchronize()
        return pending.batch

    def _letterbox(
        self, source: Any, layout: str, src_h: int, src_w: int, box: Letterbox, out: Any
    ) -> None:
        """``out`` (count, 3, height, width): the pictures of ``source`` letterboxed into it.
        Each step writes into a buffer it owns or updates one in place: at batch 32 of 1080p
        every pass over the taps moves some 150 MB, and the GPU time of this front end was a
        third of the model's (H200: 1.85 ms a batch against 5.5; bench/results/
        model_gpu_time.json)."""
        taps = self._taps_for(src_w, src_h, box, layout)
        if layout != "bgr":
            bgr = self._bgr_from_yuv(source, taps)
        else:
            bgr = source.index_select(1, taps.rows).index_select(2, taps.cols)
            bgr = bgr.permute(0, 3, 1, 2).index_select(1, self.channels)
        torch = self.torch
        rh, rw = box.resized_h, box.resized_w
        # OpenCV's INTER_LINEAR for 8-bit images: the horizontal pass in int, the vertical one
        # as its SIMD code does it ((x >> 4) * beta >> 16, summed, then (+2) >> 2). Top and
        # bottom taps are one tensor (rows 0..rh-1 the top ones): each pass serves both.
        left, right = taps.col_weights
        rows = torch.mul(bgr[..., :rw], left).addcmul_(bgr[..., rw:], right)
        rows = rows.bitwise_right_shift_(4).mul_(taps.row_weights).bitwise_right_shift_(16)
        value = torch.add(rows[..., :rh, :], rows[..., rh:, :])
        value = value.add_(2).bitwise_right_shift_(2).clamp_(0, 255)
        tensor = torch.mul(value, self.scale)
        if self.mean is not None:
            tensor = tensor - self.mean
        if self.std is not None:
            tensor = tensor / self.std
        out[:, :, box.pad_y : box.pad_y + rh, box.pad_x : box.pad_x + rw] = tensor

    def _bgr_from_yuv(self, source: Any, taps: _Taps) -> Any:
        """BGR (count, 3, 2 * resized_h, 2 * resized_w) int32 at the resize's taps, in the
        model's channel order, with OpenCV's integer arithmetic (each 2x2 block shares one
        chroma sample), from I420 or NV12: Y, U and V gathered in one pass (``taps.yuv``)."""
        torch = self.torch
        count = source.shape[0]
        yuv = source.reshape(count, -1)[:, taps.yuv] - self.yuv_offset  # int32
        luma, u, v = yuv.unbind(1)
        luma = torch.add(self.luma_round, luma.clamp_(min=0), alpha=_LUMA)
        bgr = torch.empty_like(yuv)
        blue, green, red = (bgr[:, int(i)] for i in self.position)
        torch.add(luma, u, alpha=_U_B, out=blue)
        torch.add(luma, v, alpha=-_V_G, out=green).add_(u, alpha=-_U_G)
        torch.add(luma, v, alpha=_V_R, out=red)
        return bgr.bitwise_right_shift_(20).clamp_(0, 255)

    def _taps_for(self, src_w: int, src_h: int, box: Letterbox, layout: str) -> _Taps:
        key = (src_w, src_h, box.resized_w, box.resized_h, layout)
        found = self._taps.get(key)
        if found is None:
            torch, device = self.torch, self.device
            cols, rows = tables(*key[:4])
            top = np.clip(rows.offsets, 0, src_h - 1)
            bottom = np.clip(rows.offsets + 1, 0, src_h - 1)
            right = np.minimum(cols.offsets + 1, src_w - 1)
            row_taps = np.concatenate([top, bottom]).astype(np.int64)
            col_taps = np.concatenate([cols.offsets, right]).astype(np.int64)
            found = _Taps(
                torch.from_numpy(row_taps).to(device),
                torch.from_numpy(col_taps).to(device),
                torch.from_numpy(rows.weights.T.astype(np.int32).reshape(-1, 1)).to(device),
                torch.from_numpy(np.ascontiguousarray(cols.weights.T, np.int32)).to(device),
                None
                if layout == "bgr"
                else torch.from_numpy(yuv_taps(row_taps, col_taps, src_w, src_h, layout)).to(
                    device
                ),
            )
            self._taps[key] = found
        return found


def yuv_taps(
    rows: np.ndarray, cols: np.ndarray, width: int, height: int, layout: str
) -> np.ndarray:
    """(3, rows, cols) int64: where each tap's Y, U and V lie in a flat I420 (U plane, then V)
    or NV12 (U and V interleaved) picture of ``width`` x ``height``."""
    luma = rows[:, None] * width + cols[None, :]
    chroma_rows, chroma_cols = (rows >> 1)[:, None], (cols >> 1)[None, :]
    plane = width * height
    if layout == "nv12":
        u = plane + chroma_rows * width + 2 * chroma_cols
        v = u + 1
    else:
        u = plane + chroma_rows * (width // 2) + chroma_cols
        v = u + plane // 4
    return np.stack([luma, u, v])


def _place_and_shape(picture: Picture) -> tuple[bool, tuple[int, ...]]:
    """I420 on the host and NV12 on the device share their shape: runs keep them apart."""
    return isinstance(picture, DeviceNV12), picture.shape


def _layout(picture: Picture) -> str:
    if isinstance(picture, DeviceNV12):
        return "nv12"
    return "i420" if len(picture.shape) == 2 else "bgr"
