"""NVIDIA's hardware video decoders (NVDEC) through NVIDIA's Python bindings, PyNvVideoCodec
(``pip install 'vapipe[nvdec]'``): PyAV's packets in, NV12 pictures in GPU memory out.

The container is still demuxed by PyAV, as on the software path, so timestamps, reconnects,
stall checks and the packets a clip sink copies are the same; each packet is made Annex B
(FFmpeg's ``h264_mp4toannexb`` / ``hevc_mp4toannexb``, which let Annex B through as it is)
and handed to one NVDEC decoder per stream. Every stream of a process decodes in its own
thread into the process's one CUDA context: 16 streams need no 16 contexts
(bench/results/nvdec.json: 3,014 frames/s for 16 x 1080p in one process, against 1,874 for
FFmpeg's software decoding on all 16 cores).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

import av
import numpy as np

from vapipe.pipeline.device_picture import DeviceNV12

log = logging.getLogger(__name__)

CODECS = {"h264": "H264", "hevc": "HEVC"}
"""FFmpeg's codec name -> PyNvVideoCodec's ``cudaVideoCodec`` member, for the codecs whose
8-bit 4:2:0 pictures every NVDEC generation since Maxwell decodes."""
ANNEX_B = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}
LIMITS = {"h264": (4096, 4096), "hevc": (8192, 8192)}
"""Largest coded (width, height) NVDEC takes per codec (Turing and later; NVIDIA's decoder
support matrix). Larger streams decode in software."""
MIN_SIZE = (48, 16)
NO_PTS = -1
"""The timestamp handed to the decoder for a packet without one (a raw elementary stream)."""


class DeviceDecoderUnavailable(Exception):
    """Why a hardware decoder cannot be used here or for this stream (one line)."""


def cuda_device(torch: Any, gpu: int) -> Any:
    """The torch device the pictures go to: the CUDA (on AMD, HIP) GPU ``gpu``."""
    if not torch.cuda.is_available():
        raise DeviceDecoderUnavailable("torch sees no CUDA GPU")
    if gpu >= torch.cuda.device_count():
        raise DeviceDecoderUnavailable(f"no GPU {gpu} (torch sees {torch.cuda.device_count()})")
    return torch.device("cuda", gpu)


class NvdecBackend:
    """One process's access to NVDEC: ``refuses`` says why a stream stays in software,
    ``open`` makes a stream's decoder."""

    name = "nvdec"

    def __init__(self, gpu: int = 0) -> None:
        try:
            import PyNvVideoCodec as nvc
            import torch
        except ImportError as exc:  # pragma: no cover - the message is the test
            raise DeviceDecoderUnavailable(
                f"{exc.name} is not installed (pip install 'vapipe[nvdec]')"
            ) from None
        self.nvc, self.torch, self.gpu = nvc, torch, gpu
        self.device = cuda_device(torch, gpu)

    def describe(self) -> str:
        return f"nvdec on {self.device} (PyNvVideoCodec {getattr(self.nvc, '__version__', '?')})"

    def refuses(self, video: Any) -> str | None:
        """Why this stream cannot go to NVDEC (codec, bit depth, size), None when it can.
        What the stream's first picture says (colours, rotation) is checked on that picture
        (``hardware.ProbingDecoder``)."""
        context = video.codec_context
        codec = context.name
        if codec not in CODECS:
            return f"NVDEC is not used for {codec} here (H.264 and HEVC only)"
        if context.pix_fmt not in (None, "yuv420p"):
            return f"{context.pix_fmt} pictures (NVDEC is used for 8-bit 4:2:0 only)"
        width, height = context.width, context.height
        most = LIMITS[codec]
        if width > most[0] or height > most[1] or width < MIN_SIZE[0] or height < MIN_SIZE[1]:
            return f"{width}x{height} is outside NVDEC's {codec} sizes"
        return None

    def open(self, video: Any) -> NvdecStream:
        return NvdecStream(self, video)


class NvdecStream:
    """One stream's decoder: ``decode(packet)`` gives the pictures that packet completed, in
    display order, each copied out of the decoder's surface pool into a tensor of its own (the
    pool's surfaces are reused by later packets) on a stream of its own."""

    def __init__(self, backend: NvdecBackend, video: Any) -> None:
        nvc, torch = backend.nvc, backend.torch
        self.codec = video.codec_context.name
        self.torch, self.nvc, self.device = torch, nvc, backend.device
        try:
            self.decoder = nvc.CreateDecoder(
                gpuid=backend.gpu,
                codec=getattr(nvc.cudaVideoCodec, CODECS[self.codec]),
                usedevicememory=True,
            )
        except Exception as exc:  # the library's own exception types
            raise DeviceDecoderUnavailable(f"NVDEC refused the stream: {exc}") from None
        self.on_gpu = self.device.type == "cuda"
        self.stream = torch.cuda.Stream(device=self.device) if self.on_gpu else None
        self.restart(video)

    def restart(self, video: Any) -> bool:
        """Takes the packets of a new session of the source (a reconnect, a looped file's next
        pass) on the same decoder, if the codec is the same: a decoder takes a stream again
        after its end, and making one is slow (measured on the H100 machine: some 290 ms to
        create, start and destroy one; a looped 10 s clip paid that every pass, per stream,
        holding up its whole shard)."""
        if video.codec_context.name != self.codec:
            return False
        self.time_base = video.time_base
        self.annexb = av.BitStreamFilterContext(ANNEX_B[self.codec], video)
        self.ended = False
        return True

    def decode(self, packet: Any) -> list[DeviceNV12]:
        """Pictures completed by this packet; the demuxer's closing empty packet drains the
        decoder (after it, the stream decodes no more)."""
        if self.ended:
            return []
        if packet.size == 0:  # end of the stream: what the filter and the decoder hold
            pictures = [p for f in self.annexb.filter(None) for p in self._feed(f)]
            self.ended = True
            return pictures + self._feed(None)
        return [p for f in self.annexb.filter(packet) for p in self._feed(f)]

    def _feed(self, packet: Any) -> list[DeviceNV12]:
        data = np.frombuffer(packet, np.uint8) if packet is not None else None
        message = self.nvc.PacketData()
        if data is not None and data.size:
            message.bsl_data, message.bsl = data.ctypes.data, data.size
            pts = packet.pts if packet.pts is not None else packet.dts
            message.pts = NO_PTS if pts is None else pts
        else:  # an empty packet: the decoder's end of stream
            message.bsl_data, message.bsl = 0, 0
        decoded = self.decoder.Decode(message)
        del data  # the decoder has parsed the bytes by now; the view held them till here
        return [self._picture(frame) for frame in decoded] if decoded else []

    def _picture(self, frame: Any) -> DeviceNV12:
        torch = self.torch
        pts = int(frame.getPTS())
        with torch.cuda.stream(self.stream) if self.on_gpu else nullcontext():
            tensor = torch.from_dlpack(frame).clone()
            ready = None
            if self.on_gpu:
                ready = torch.cuda.Event()
                ready.record(self.stream)
        return DeviceNV12(tensor, ready, None if pts == NO_PTS else pts, self.time_base)
