"""NVIDIA's hardware video decoders (NVDEC) through NVIDIA's Python bindings, PyNvVideoCodec
(``pip install 'vapipe[nvdec]'``): PyAV's packets in, NV12 pictures in GPU memory out.

The container is still demuxed by PyAV, as on the software path, so timestamps, reconnects,
stall checks and the packets a clip sink copies are the same; each packet is made Annex B
(FFmpeg's ``h264_mp4toannexb`` / ``hevc_mp4toannexb``, which let Annex B through as it is)
and handed to one NVDEC decoder per stream. Every stream of a process decodes in its own
thread into the process's one CUDA context: 16 streams need no 16 contexts
(bench/results/decoders_alone.json: 3,778 frames/s for 16 x 1080p in one process on the H100,
its seven engines 99% busy).
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

CODECS = {"h264": "H264", "hevc": "HEVC"}
"""FFmpeg's codec name -> PyNvVideoCodec's ``cudaVideoCodec`` member, for the codecs whose
8-bit 4:2:0 pictures every NVDEC generation since Maxwell decodes."""
LIMITS = {"h264": (4096, 4096), "hevc": (8192, 8192)}
"""Largest coded (width, height) NVDEC takes per codec (Turing and later; NVIDIA's decoder
support matrix). Larger streams decode in software."""
MIN_SIZE = (48, 16)


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

    def takes(self) -> str:
        """The streams it is given, for ``doctor``."""
        sizes = ", ".join(f"{codec} up to {w}x{h}" for codec, (w, h) in LIMITS.items())
        return f"8-bit 4:2:0 {sizes}"

    def refuses(self, video: Any) -> str | None:
        """Why this stream cannot go to NVDEC (codec, bit depth, size), None when it can.
        What the stream's first picture says (colours, rotation) is checked on that picture
        (``hardware.ProbingDecoder``)."""
        context = video.codec_context
        codec = context.name
        refused = stream_refusal("NVDEC", video, CODECS)
        if refused is not None:
            return refused
        width, height = context.width, context.height
        most = LIMITS[codec]
        if width > most[0] or height > most[1] or width < MIN_SIZE[0] or height < MIN_SIZE[1]:
            return f"{width}x{height} is outside NVDEC's {codec} sizes"
        return None

    def open(self, video: Any) -> NvdecStream:
        return NvdecStream(self, video)


class NvdecStream(AnnexBStream):
    """One stream's NVDEC decoder; each picture is copied out of the decoder's surface pool
    (which later packets write over) into a tensor of its own, on a stream of its own."""

    def __init__(self, backend: NvdecBackend, video: Any) -> None:
        nvc = self.nvc = backend.nvc
        self.codec = video.codec_context.name
        try:
            self.decoder = nvc.CreateDecoder(
                gpuid=backend.gpu,
                codec=getattr(nvc.cudaVideoCodec, CODECS[self.codec]),
                usedevicememory=True,
            )
        except Exception as exc:  # the library's own exception types
            raise DeviceDecoderUnavailable(f"NVDEC refused the stream: {exc}") from None
        self._copies_on(backend.torch, backend.device)
        self.restart(video)

    def _feed(self, packet: Any) -> list[DeviceNV12]:
        data = np.frombuffer(packet, np.uint8) if packet is not None else None
        message = self.nvc.PacketData()
        if data is not None and data.size:
            message.bsl_data, message.bsl = data.ctypes.data, data.size
            message.pts = packet_pts(packet)
        else:  # an empty packet: the decoder's end of stream
            message.bsl_data, message.bsl = 0, 0
        decoded = self.decoder.Decode(message)
        del data  # the decoder has parsed the bytes by now; the view held them till here
        return [self._picture(frame) for frame in decoded] if decoded else []

    def _picture(self, frame: Any) -> DeviceNV12:
        # The capsule itself, made for the copy stream, not the frame: torch's from_dlpack
        # would ask the frame its device and the current stream first (issue 61's profile).
        stream = self.stream.cuda_stream if self.stream is not None else None
        return self._copied(
            lambda: self.torch.from_dlpack(frame.__dlpack__(stream=stream)).clone(),
            int(frame.getPTS()),
        )
