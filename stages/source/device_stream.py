"""What every GPU video decoder of this project shares, whichever vendor's library runs it:
the checks made before a stream goes to one, and the Annex B feeding of PyAV's packets with the
session restarts (stages/source/nvdec.py for NVIDIA, rocdecode.py for AMD)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import av

from vapipe.pipeline.device_picture import DeviceNV12

ANNEX_B = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}
"""FFmpeg's filters that make MP4/MKV packets Annex B (start codes, parameter sets in band), as
the vendors' parsers take them; a stream already in Annex B (RTSP) passes through unchanged."""
NO_PTS = -1
"""The timestamp handed to a decoder for a packet without one (a raw elementary stream)."""


class DeviceDecoderUnavailable(Exception):
    """Why a hardware decoder cannot be used here or for this stream (one line)."""


def cuda_device(torch: Any, gpu: int) -> Any:
    """The torch device the pictures go to: GPU ``gpu`` (torch's ROCm builds call AMD's GPUs
    ``cuda`` too)."""
    if not torch.cuda.is_available():
        raise DeviceDecoderUnavailable("torch sees no CUDA GPU")
    if gpu >= torch.cuda.device_count():
        raise DeviceDecoderUnavailable(f"no GPU {gpu} (torch sees {torch.cuda.device_count()})")
    return torch.device("cuda", gpu)


def stream_refusal(engine: str, video: Any, codecs: dict[str, Any]) -> str | None:
    """Why ``engine`` is not given this stream (codec, bit depth), None when it is."""
    context = video.codec_context
    if context.name not in codecs:
        return f"{engine} is not used for {context.name} here (H.264 and HEVC only)"
    if context.pix_fmt not in (None, "yuv420p"):
        return f"{context.pix_fmt} pictures ({engine} is used for 8-bit 4:2:0 only)"
    return None


class AnnexBStream(ABC):
    """One stream's hardware decoder fed PyAV's packets: ``decode(packet)`` gives the
    pictures that packet completed, in display order; the demuxer's closing empty packet
    drains the decoder; ``restart`` takes the next session of the same source (a reconnect, a
    looped file's next pass) on the same decoder, which takes a stream again after its end."""

    codec: str
    time_base: Any

    def _copies_on(self, torch: Any, device: Any) -> None:
        """Pictures are copied out of the decoder on a CUDA stream of this stream's own (none
        on the CPU, where torch has no streams)."""
        self.torch, self.device = torch, device
        self.on_gpu = device.type == "cuda"
        self.stream = torch.cuda.Stream(device=device) if self.on_gpu else None
        self._stream_thread: int | None = None

    def _copied(self, copy: Callable[[], Any], pts: int) -> DeviceNV12:
        """The picture ``copy()`` makes a tensor of its own of (out of the decoder's memory,
        which later packets reuse), made on this stream and finished before it is handed on:
        its readers wait for nothing. The source's thread waits for its own copy (some tens
        of microseconds, the interpreter lock let go), so the letterbox, the one thread every
        frame passes, makes no wait a picture: 32 torch calls a batch, each of which had to
        win the interpreter lock back from every source thread (issue 61's profile)."""
        if self.stream is not None:
            torch = self.torch
            # A source's thread does no other GPU work: this stream is made its current
            # stream once, instead of entered and left around every picture (three torch
            # calls a picture, held under the interpreter lock: issue 61's profile).
            thread = threading.get_ident()
            if self._stream_thread != thread:
                torch.cuda.set_stream(self.stream)
                self._stream_thread = thread
            tensor = copy()
            self.stream.synchronize()
        else:
            tensor = copy()
        return DeviceNV12(tensor, None, None if pts == NO_PTS else pts, self.time_base)

    def restart(self, video: Any) -> bool:
        """False where the new session is of another codec (then a new decoder is made).
        Making a decoder is slow: on the H100 machine some 290 ms to create, start and destroy
        an NVDEC one; a looped 10 s clip paid that every pass, per stream, holding up its
        whole shard (bench/results/streams/variants_nvdec.json)."""
        if video.codec_context.name != self.codec:
            return False
        self.time_base = video.time_base
        self.annexb = av.BitStreamFilterContext(ANNEX_B[self.codec], video)
        self.ended = False
        return True

    def decode(self, packet: Any) -> list[DeviceNV12]:
        if self.ended:
            return []
        if packet.size == 0:  # end of the stream: what the filter and the decoder hold
            pictures = [p for f in self.annexb.filter(None) for p in self._feed(f)]
            self.ended = True
            return pictures + self._feed(None)
        return [p for f in self.annexb.filter(packet) for p in self._feed(f)]

    @abstractmethod
    def _feed(self, packet: Any) -> list[DeviceNV12]:
        """The pictures a filtered packet (None: the end of the stream) completed."""


def packet_pts(packet: Any) -> int:
    pts = packet.pts if packet.pts is not None else packet.dts
    return NO_PTS if pts is None else int(pts)
