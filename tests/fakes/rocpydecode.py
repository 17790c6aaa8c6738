"""A stand-in for AMD's rocPyDecode (``pyRocVideoDecode.decoder``) with the calls
stages/source/rocdecode.py makes, written from rocPyDecode's source: FFmpeg's decoder behind
rocDecode's interface. Like a VCN surface, a picture's planes lie at a pitch wider than the
picture, with padding rows under the luma plane; ``ReleaseFrame`` hands the surface back, and
the next picture is written into it."""

from __future__ import annotations

import ctypes
from types import ModuleType
from typing import Any

import av
import numpy as np

PITCH_PAD, ROWS_PAD = 64, 8


class Plane:
    def __init__(self, view: np.ndarray) -> None:
        self.view = view

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.view.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.view.__dlpack_device__()  # type: ignore[return-value]


class Packet:
    def __init__(self, pts: int, size: int, address: int) -> None:
        self.frame_pts, self.bitstream_size, self.bitstream_adrs = pts, size, address
        self.ext_buf: list[Plane] = []


class Decoder:
    def __init__(self, codec: str, device_id: int = 0, mem_type: int = 0) -> None:
        self.context = av.CodecContext.create(codec, "r")
        self.ready: list[Any] = []
        self.surface: np.ndarray | None = None
        self.held = False
        self.codec, self.mem_type = codec, mem_type

    def IsCodecSupported(self, device_id: int, codec: str, bit_depth: int) -> bool:
        return bit_depth == 8

    def DecodeFrame(self, packet: Packet) -> int:
        if packet.bitstream_size == 0:
            self.ready += self.context.decode(None)
            self.context.flush_buffers()
        else:
            message = av.Packet(ctypes.string_at(packet.bitstream_adrs, packet.bitstream_size))
            message.pts = packet.frame_pts
            self.ready += self.context.decode(message)
        return len(self.ready)

    def GetFrameYuv(self, packet: Packet, separate_planes: bool = False) -> int:
        assert separate_planes and not self.held, "one surface, released before the next"
        frame = self.ready.pop(0)
        i420 = frame.to_ndarray(format="yuv420p")
        height, width = frame.height, frame.width
        pitch, vstride = width + PITCH_PAD, height + ROWS_PAD
        if self.surface is None:
            self.surface = np.zeros(pitch * (vstride + height // 2), np.uint8)
        luma = self.surface[: pitch * height].reshape(height, pitch)
        chroma = self.surface[pitch * vstride :].reshape(height // 2, pitch)
        luma[:, :width] = i420[:height]
        quarter = i420[height:].reshape(-1)
        split = height // 2 * (width // 2)
        chroma[:, 0:width:2] = quarter[:split].reshape(height // 2, width // 2)
        chroma[:, 1:width:2] = quarter[split:].reshape(height // 2, width // 2)
        packet.ext_buf = [Plane(luma[:, :width]), Plane(chroma[:, :width])]
        self.held = True
        return int(frame.pts)

    def ReleaseFrame(self, packet: Packet) -> None:
        self.held = False


def module(created: list[Any] | None = None) -> ModuleType:
    """``pyRocVideoDecode.decoder`` (put it in ``sys.modules`` under that name, with a
    ``pyRocVideoDecode`` package holding it)."""
    fake = ModuleType("pyRocVideoDecode.decoder")

    def decoder(codec: str, device_id: int = 0, mem_type: int = 0) -> Decoder:
        made = Decoder(codec, device_id, mem_type)
        if created is not None:
            created.append(made)
        return made

    def packet(pts: int, size: int, buffer: np.ndarray) -> Packet:
        return Packet(pts, size, buffer.ctypes.data if size else 0)

    fake.decoder = decoder  # type: ignore[attr-defined]
    fake.GetRocDecCodecID = lambda name: name  # type: ignore[attr-defined]
    fake.GetRocPyDecPacket = packet  # type: ignore[attr-defined]
    return fake
