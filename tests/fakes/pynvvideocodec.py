"""A stand-in for NVIDIA's PyNvVideoCodec with the calls stages/source/nvdec.py makes, for
machines without an NVIDIA GPU: FFmpeg's H.264/HEVC decoder behind NVDEC's interface
(Annex B packets in, NV12 pictures out through DLPack, timestamps passed through). Like the
real decoder, a picture lives in a surface of a small pool that later packets write over, so
a reader that does not copy its pictures out in time reads the wrong picture."""

from __future__ import annotations

import ctypes
from types import ModuleType, SimpleNamespace
from typing import Any

import av
import numpy as np

from vapipe.pipeline.device_picture import i420_to_nv12

POOL = 2


class PacketData:
    def __init__(self) -> None:
        self.bsl_data, self.bsl, self.pts = 0, 0, 0


class DecodedFrame:
    def __init__(self, surface: np.ndarray, pts: int) -> None:
        self.surface, self.pts = surface, pts

    def getPTS(self) -> int:
        return self.pts

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.surface.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.surface.__dlpack_device__()  # type: ignore[return-value]


class Decoder:
    def __init__(self, codec: str, fail_after: int | None) -> None:
        self.context = av.CodecContext.create(codec, "r")
        self.surfaces: list[np.ndarray] = []
        self.next = 0
        self.packets = 0
        self.fail_after = fail_after

    def Decode(self, packet: PacketData) -> list[DecodedFrame]:
        self.packets += 1
        if self.fail_after is not None and self.packets > self.fail_after:
            raise RuntimeError("CUDA_ERROR_LAUNCH_FAILED")
        if packet.bsl == 0:  # end of stream: drained, then ready for a stream again
            frames = self.context.decode(None)
            self.context.flush_buffers()
        else:
            data = ctypes.string_at(packet.bsl_data, packet.bsl)
            message = av.Packet(data)
            message.pts = packet.pts
            frames = self.context.decode(message)
        return [self._surface(frame) for frame in frames]

    def _surface(self, frame: Any) -> DecodedFrame:
        nv12 = i420_to_nv12(frame.to_ndarray(format="yuv420p"))
        if len(self.surfaces) < POOL:
            self.surfaces.append(np.empty_like(nv12))
        surface = self.surfaces[self.next]
        self.next = (self.next + 1) % POOL
        surface[...] = nv12
        return DecodedFrame(surface, frame.pts)


def module(fail_after: int | None = None, created: list[Any] | None = None) -> ModuleType:
    """A module object to put in ``sys.modules["PyNvVideoCodec"]``; its decoders raise on
    the packet after ``fail_after`` (a GPU fault mid-stream); ``created`` collects them."""
    fake = ModuleType("PyNvVideoCodec")
    fake.__version__ = "fake"  # type: ignore[attr-defined]
    fake.PacketData = PacketData  # type: ignore[attr-defined]
    fake.cudaVideoCodec = SimpleNamespace(H264="h264", HEVC="hevc")  # type: ignore[attr-defined]

    def create_decoder(gpuid: int, codec: str, usedevicememory: bool) -> Decoder:
        assert usedevicememory, "pictures are meant to stay on the device"
        decoder = Decoder(codec, fail_after)
        if created is not None:
            created.append(decoder)
        return decoder

    fake.CreateDecoder = create_decoder  # type: ignore[attr-defined]
    return fake
