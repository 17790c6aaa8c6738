"""One live stream's encoding: pictures to H.264 access units (Annex B, for RTSP) and the same
packets muxed into fragmented MP4 (one fragment per frame, for a browser's Media Source
Extensions). Encoded once, whoever watches and however."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import cv2
import numpy as np
from av.video.frame import PictureType

TIME_BASE = Fraction(1, 90_000)
START_CODE = b"\x00\x00\x00\x01"
FRAGMENT_EVERY_FRAME = {"movflags": "frag_keyframe+empty_moov+default_base_moof+frag_every_frame"}


@dataclass(frozen=True)
class Unit:
    """One encoded picture."""

    data: bytes
    """Annex B: start codes, SPS and PPS before each keyframe."""
    keyframe: bool
    pts: int
    """In ``TIME_BASE``, from the stream's first picture."""


def output_size(width: int, height: int, most: int) -> tuple[int, int]:
    """The stream's size: at most ``most`` wide, the source's aspect, both even (4:2:0)."""
    if width > most:
        height, width = round(height * most / width), most
    return max(2, width - width % 2), max(2, height - height % 2)


def parameter_sets(annex_b: bytes) -> bytes:
    """The SPS and PPS NAL units of a keyframe's access unit, with their start codes (what an
    MP4 muxer needs as the stream's extradata)."""
    kept = []
    for unit in annex_b.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01").split(b"\x00\x00\x01"):
        if unit and unit[0] & 0x1F in (7, 8):
            kept.append(START_CODE + unit)
    return b"".join(kept)


def codec_string(extradata: bytes) -> str:
    """The stream's MIME type with its codec (``avc1.PPCCLL``: profile, constraints, level
    from the SPS), as Media Source Extensions want it."""
    for unit in extradata.split(START_CODE):
        if len(unit) >= 4 and unit[0] & 0x1F == 7:
            return f'video/mp4; codecs="avc1.{unit[1]:02X}{unit[2]:02X}{unit[3]:02X}"'
    return 'video/mp4; codecs="avc1.42E01F"'


class H264:
    """x264 tuned for live viewing: no B-frames, no look-ahead (a frame leaves as soon as it
    is encoded), a keyframe every ``keyframe_s`` and on request (a viewer joining)."""

    def __init__(
        self, width: int, height: int, rate: float, keyframe_s: float, bitrate: int, threads: int
    ) -> None:
        self.codec = av.CodecContext.create("libx264", "w")
        self.codec.width, self.codec.height = width, height
        self.codec.pix_fmt = "yuv420p"
        self.codec.time_base = TIME_BASE
        # The rate control spreads the bits over ``framerate`` pictures a second (unset, it
        # reads the 90 kHz time base as 90,000 pictures a second and starves every one).
        self.codec.framerate = Fraction(rate).limit_denominator(1001)
        self.codec.bit_rate = bitrate
        self.codec.thread_count = threads
        self.codec.options = {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "bf": "0",
            "g": str(max(1, round(rate * keyframe_s))),
            "profile": "baseline",
        }
        self.size = (width, height)

    def encode(self, picture: np.ndarray, pts: int, keyframe: bool) -> list[Unit]:
        """``picture`` (BGR, any size: scaled to the stream's) as the access units it gives."""
        if picture.shape[1::-1] != self.size:
            picture = cv2.resize(picture, self.size, interpolation=cv2.INTER_AREA)
        yuv = cv2.cvtColor(np.ascontiguousarray(picture), cv2.COLOR_BGR2YUV_I420)
        frame = av.VideoFrame.from_ndarray(yuv.astype(np.uint8, copy=False), format="yuv420p")
        frame.pts, frame.time_base = pts, TIME_BASE
        if keyframe:
            frame.pict_type = PictureType.I
        return [
            Unit(bytes(packet), bool(packet.is_keyframe), int(packet.pts or 0))
            for packet in self.codec.encode(frame)
        ]

    def close(self) -> None:
        with contextlib.suppress(av.FFmpegError):
            self.codec.encode(None)


class Chunks(io.RawIOBase):
    """Where the MP4 muxer writes: every write kept as one chunk (the muxer writes a
    fragment, moof and mdat, in one go)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.chunks.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def take(self) -> list[bytes]:
        chunks, self.chunks = self.chunks, []
        return chunks


class FragmentedMp4:
    """The units muxed into fragmented MP4: ``init`` (ftyp + moov) once, then a fragment per
    unit. The muxer writes a unit's fragment when the next one comes (it needs the next one's
    time for the duration): ``add`` returns the fragments completed, with whether each
    starts at a keyframe."""

    def __init__(self, width: int, height: int) -> None:
        self.size = (width, height)
        self.out = Chunks()
        self.container: Any = None
        self.stream: Any = None
        self.init = b""
        self.codec = codec_string(b"")
        self._pending_key: bool | None = None

    def add(self, unit: Unit) -> list[tuple[bytes, bool]]:
        if self.container is None:
            if not unit.keyframe:
                return []
            self._open(parameter_sets(unit.data))
        packet = av.Packet(unit.data)
        packet.pts = packet.dts = unit.pts
        packet.time_base = TIME_BASE
        packet.is_keyframe = unit.keyframe
        packet.stream = self.stream
        self.container.mux(packet)
        done = []
        for chunk in self.out.take():
            if chunk[4:8] in (b"ftyp", b"moov"):  # the header, written with the first unit
                self.init += chunk
            else:
                done.append((chunk, bool(self._pending_key)))
        self._pending_key = unit.keyframe
        return done

    def _open(self, extradata: bytes) -> None:
        self.container = av.open(self.out, "w", format="mp4", options=FRAGMENT_EVERY_FRAME)
        self.stream = self.container.add_stream("h264")
        self.stream.width, self.stream.height = self.size
        self.stream.time_base = TIME_BASE
        self.stream.codec_context.extradata = extradata
        self.codec = codec_string(extradata)

    def close(self) -> None:
        if self.container is not None:
            with contextlib.suppress(av.FFmpegError, ValueError):
                self.container.close()
