"""AMD's hardware video decoders (VCN) through rocDecode's Python bindings, rocPyDecode
(ROCm's ``rocpydecode`` package, with a ROCm build of torch): PyAV's packets in, NV12
pictures in GPU memory out, as stages/source/nvdec.py does on NVIDIA.

Written from rocPyDecode's source (ROCm/rocPyDecode at 4b88e4e: ``GetRocPyDecPacket`` wraps a
caller's bitstream, ``DecodeFrame`` takes it, an empty one ends the stream, ``GetFrameYuv``
with separate planes exposes Y and the interleaved UV through DLPack, ``ReleaseFrame`` hands
the surface back) and tested here through a stand-in of those calls
(tests/fakes/rocpydecode.py). It has not run on an AMD GPU: docs/design/hardware-decode.md
says what to check on one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vapipe.pipeline.device_picture import DeviceNV12
from vapipe.stages.source.device_stream import (
    AnnexBStream,
    DeviceDecoderUnavailable,
    cuda_device,
    packet_pts,
    stream_refusal,
)

CODECS = {"h264": "h264", "hevc": "hevc"}
"""FFmpeg's codec names rocPyDecode maps to its own (``GetRocDecCodecID``); every VCN since
Vega decodes both at 8-bit 4:2:0. Each stream is asked of the GPU itself at open
(``IsCodecSupported``)."""
INTERNAL_SURFACES = 0
"""rocPyDecode's ``mem_type`` 0: pictures stay in the decoder's own surfaces, read in place
(1 copies each into another device buffer first, 2 to the host)."""
EMPTY = np.zeros(0, np.uint8)


def rocm_device(torch: Any, gpu: int) -> Any:
    """AMD GPU ``gpu`` as a ROCm build of torch names it (``cuda``)."""
    if getattr(torch.version, "hip", None) is None:
        raise DeviceDecoderUnavailable("this torch is not a ROCm build")
    return cuda_device(torch, gpu)


class RocdecodeBackend:
    """One process's access to VCN through rocDecode."""

    name = "rocdecode"

    def __init__(self, gpu: int = 0) -> None:
        try:
            import pyRocVideoDecode.decoder as rocdec
            import torch
        except ImportError as exc:  # pragma: no cover - the message is the test
            raise DeviceDecoderUnavailable(
                f"{(exc.name or '').split('.')[0]} is not installed (ROCm's rocpydecode package)"
            ) from None
        self.rocdec, self.torch, self.gpu = rocdec, torch, gpu
        self.device = rocm_device(torch, gpu)

    def describe(self) -> str:
        return f"rocdecode on {self.device} (VCN)"

    def takes(self) -> str:
        """The streams it is given, for ``doctor``."""
        return f"8-bit 4:2:0 {', '.join(CODECS)}, each stream asked of the GPU when it opens"

    def refuses(self, video: Any) -> str | None:
        return stream_refusal("rocDecode", video, CODECS)

    def open(self, video: Any) -> RocdecodeStream:
        return RocdecodeStream(self, video)


class RocdecodeStream(AnnexBStream):
    """One stream's VCN decoder: each picture is copied out of the decoder's surface (Y and
    UV at the surface's pitch, which may be wider than the picture) into one NV12 tensor of
    its own, and the surface handed back."""

    def __init__(self, backend: RocdecodeBackend, video: Any) -> None:
        rocdec = self.rocdec = backend.rocdec
        self.codec = video.codec_context.name
        codec_id = rocdec.GetRocDecCodecID(CODECS[self.codec])
        try:
            self.decoder = rocdec.decoder(
                codec_id, device_id=backend.gpu, mem_type=INTERNAL_SURFACES
            )
            supported = self.decoder.IsCodecSupported(backend.gpu, codec_id, 8)
        except Exception as exc:  # the library's own exception types
            raise DeviceDecoderUnavailable(f"rocDecode refused the stream: {exc}") from None
        if not supported:
            raise DeviceDecoderUnavailable(f"this GPU's VCN does not decode 8-bit {self.codec}")
        self._copies_on(backend.torch, backend.device)
        self.restart(video)

    def _feed(self, packet: Any) -> list[DeviceNV12]:
        data = np.frombuffer(packet, np.uint8) if packet is not None else EMPTY
        pts = packet_pts(packet) if packet is not None else 0
        message = self.rocdec.GetRocPyDecPacket(pts, data.size, data)  # size 0: end of stream
        count = self.decoder.DecodeFrame(message)
        return [self._picture(message) for _ in range(count)]

    def _picture(self, message: Any) -> DeviceNV12:
        torch = self.torch
        pts = int(self.decoder.GetFrameYuv(message, True))  # True: Y and UV apart

        def copy() -> Any:  # one NV12 tensor, past the surface's pitch and padding rows
            luma = torch.from_dlpack(message.ext_buf[0].__dlpack__(message))
            chroma = torch.from_dlpack(message.ext_buf[1].__dlpack__(message))
            return torch.cat((luma, chroma))

        picture = self._copied(copy, pts)
        if picture.ready is not None:
            picture.ready.synchronize()  # copied before the decoder may reuse the surface
        self.decoder.ReleaseFrame(message)
        return picture
