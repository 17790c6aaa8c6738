"""A decoded picture left in GPU memory by a hardware decoder (NVDEC, and on AMD rocDecode),
as NV12: the luma plane, then the chroma plane with U and V interleaved.

It stands where the software path's decoder planes stand (``pipeline.frame.I420Planes``): a
device front end (``stages/preprocess/torch_letterbox.py``) reads ``tensor`` where it lies
and letterboxes it there; anything that wants pixels on the host (``Frame.image`` for the
video sink, snapshots, crops; ``Frame.luma`` for motion) gets them through ``to_array`` or
``luma``, one download each, as the I420 array the software decoder would have made: the
two decoders' pictures are the same bits (H.264 and HEVC decoding is exact), so every path
downstream sees the same pixels whichever decoded them.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class DeviceNV12:
    """``pipeline.frame.I420Planes`` over an NV12 tensor (``height * 3 / 2``, ``width``)
    uint8 on a torch device. ``ready`` is an event recorded after the tensor was written, for a
    reader on another stream to wait for (``Stream.wait_event``) before it reads; None where
    the picture was finished before it was handed on (the hardware decoders' copies, issue 61)
    or the device has no streams, as on the CPU."""

    __slots__ = ("nbytes", "pts", "ready", "shape", "tensor", "time_base")

    def __init__(self, tensor: Any, ready: Any, pts: int | None, time_base: Any) -> None:
        self.tensor, self.ready = tensor, ready
        self.shape = (int(tensor.shape[0]), int(tensor.shape[1]))
        self.nbytes = self.shape[0] * self.shape[1]
        self.pts, self.time_base = pts, time_base

    @property
    def height(self) -> int:
        return self.shape[0] * 2 // 3

    def host_nv12(self) -> np.ndarray:
        """The NV12 array, downloaded (the one copy to the host)."""
        if self.ready is not None:
            self.ready.synchronize()
        array: np.ndarray = self.tensor.cpu().numpy()
        return array

    def to_array(self) -> np.ndarray:
        return nv12_to_i420(self.host_nv12())

    def copy_into(self, out: np.ndarray) -> None:
        out[...] = self.to_array().ravel()

    def luma(self) -> np.ndarray:
        if self.ready is not None:
            self.ready.synchronize()
        array: np.ndarray = self.tensor[: self.height].cpu().numpy()
        return array


def nv12_to_i420(nv12: np.ndarray) -> np.ndarray:
    """The same picture with its chroma planes apart (U, then V), as FFmpeg's yuv420p."""
    rows, width = nv12.shape
    height = rows * 2 // 3
    out = np.empty_like(nv12)
    out[:height] = nv12[:height]
    chroma = nv12[height:].reshape(height // 2, width // 2, 2)
    quarter = height // 2 * (width // 2)
    flat = out[height:].reshape(-1)
    flat[:quarter] = chroma[..., 0].ravel()
    flat[quarter:] = chroma[..., 1].ravel()
    return out


def i420_to_nv12(i420: np.ndarray) -> np.ndarray:
    """The inverse of ``nv12_to_i420`` (what a hardware decoder gives, made from FFmpeg's
    yuv420p: the fakes' decoders and the tests use it)."""
    rows, width = i420.shape
    height = rows * 2 // 3
    out = np.empty_like(i420)
    out[:height] = i420[:height]
    flat = i420[height:].reshape(-1)
    quarter = height // 2 * (width // 2)
    chroma = out[height:].reshape(height // 2, width // 2, 2)
    chroma[..., 0] = flat[:quarter].reshape(height // 2, width // 2)
    chroma[..., 1] = flat[quarter:].reshape(height // 2, width // 2)
    return out
