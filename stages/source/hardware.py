"""Which decoder a source's stream goes to: FFmpeg's software decoder, or a GPU's own video
decoders into device memory (``hwaccel = "nvdec"``, or ``"auto"`` where one works).

The choice is per stream and never costs a frame: a process without the decoder library or a
GPU, a codec, bit depth or size the hardware does not take, or a first picture that would not
travel as plain I420 on the software path either (full range, BT.709, rotated) keeps that
stream in software, with one log line saying why. Hardware decoding starts from the stream's
first packet: the packets are decoded in software until the first picture comes out, that
picture is checked with the software path's own test (``opening.plain_i420``), and the same
packets then go to the hardware decoder, which decodes the stream from its start.

Backends (``BACKENDS``) are the vendor libraries (NVIDIA's PyNvVideoCodec in nvdec.py, AMD's
rocPyDecode in rocdecode.py); this module knows none of them, only their calls:
``refuses(stream)``, ``open(stream)``, and the stream's ``decode(packet)`` and ``restart``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.device_stream import DeviceDecoderUnavailable
from vapipe.stages.source.nvdec import NvdecBackend
from vapipe.stages.source.opening import plain_i420
from vapipe.stages.source.rocdecode import RocdecodeBackend

log = logging.getLogger(__name__)


class StreamDecoder(Protocol):
    def decode(self, packet: Any) -> list[Any]:
        """The pictures this packet completed: PyAV frames or ``DeviceNV12``, each with
        ``pts`` and ``time_base``."""
        ...


class Backend(Protocol):
    name: str

    def describe(self) -> str: ...

    def takes(self) -> str: ...

    def refuses(self, video: Any) -> str | None: ...

    def open(self, video: Any) -> DeviceStream: ...


class DeviceStream(StreamDecoder, Protocol):
    def restart(self, video: Any) -> bool:
        """Takes a new session of the same source; False where it cannot (another codec)."""
        ...


BACKENDS: dict[str, Callable[[int], Backend]] = {
    "nvdec": NvdecBackend,
    "rocdecode": RocdecodeBackend,
}
"""``hwaccel`` values this project decodes with itself (not FFmpeg's device types), in the
order ``auto`` tries them."""


class SoftwareDecoder:
    """FFmpeg's decoder of the stream (the PyAV stream the packet came from)."""

    def decode(self, packet: Any) -> list[Any]:
        pictures: list[Any] = packet.decode()
        return pictures


SOFTWARE = SoftwareDecoder()


class ProbingDecoder:
    """Software until the first picture, then the hardware decoder from the first packet on,
    or software to the end when that picture or the hardware says no."""

    def __init__(
        self,
        backend: Backend,
        video: Any,
        auto_rotate: bool,
        on_refusal: Callable[[str], None],
        previous: DeviceStream | None = None,
    ) -> None:
        self.backend, self.video = backend, video
        self.previous = previous  # the source's decoder of an earlier session, to reuse
        self.auto_rotate, self.on_refusal = auto_rotate, on_refusal
        self.held: list[Any] | None = []  # the packets decoded in software so far
        self.device: DeviceStream | None = None
        self.resume_at_keyframe = False

    @property
    def on_device(self) -> bool:
        return self.device is not None

    def decode(self, packet: Any) -> list[Any]:
        if self.device is not None:
            try:
                return self.device.decode(packet)
            except Exception as exc:  # a vendor library's own error types
                self.device = None
                self.on_refusal(f"{self.backend.name} failed mid-stream ({exc})")
                # The software decoder saw only the first packets, and this packet's bytes
                # went to the hardware path: it starts afresh at the next keyframe rather than
                # conceal pictures whose references it never had.
                self.video.codec_context.flush_buffers()
                self.resume_at_keyframe = True
                return []
        if self.held is None:
            if self.resume_at_keyframe and not packet.is_keyframe:
                return []
            self.resume_at_keyframe = False
            return packet.decode()
        # A packet's bytes go to the filter of the hardware path later (which takes them):
        # the software decoder reads them first.
        pictures: list[Any] = packet.decode()
        self.held.append(packet)
        if not pictures:
            return []
        held, self.held = self.held, None
        if not plain_i420(pictures[0], self.auto_rotate):
            self.on_refusal("its pictures are not plain 4:2:0 BT.601 (colours or rotation)")
            return pictures
        try:
            device = self.previous
            if device is None or not device.restart(self.video):
                device = self.backend.open(self.video)
            decoded = [picture for early in held for picture in device.decode(early)]
        except DeviceDecoderUnavailable as exc:
            self.on_refusal(str(exc))
            return pictures
        self.device = device
        return decoded


class DecoderChoice:
    """One source's decoders, a new one per session (connection or file pass)."""

    def __init__(self, name: str, config: SourceConfig) -> None:
        self.name = name
        self.auto_rotate = config.auto_rotate
        wanted = config.hwaccel
        self.auto = wanted == "auto"
        self.names = list(BACKENDS) if self.auto else [wanted] if wanted in BACKENDS else []
        self.gpu = int(config.hwaccel_device or 0) if self.names else 0
        self.backend: Backend | None = None
        self.refused: str | None = None  # why the last session decodes in software
        self.current: StreamDecoder = SOFTWARE
        self._tried = False
        self._told: set[str] = set()

    def describe(self) -> str:
        """What decodes the current session, for ``--stats``."""
        if isinstance(self.current, ProbingDecoder) and self.current.on_device:
            return self.current.backend.name
        return "software" + (f" ({self.refused})" if self.refused else "")

    def for_session(self, video: Any) -> StreamDecoder:
        last = self.current
        previous = last.device if isinstance(last, ProbingDecoder) else None
        self.current = SOFTWARE
        backend = self._backend()
        if backend is not None:
            reason = backend.refuses(video)
            if reason is None:
                self.current = ProbingDecoder(
                    backend, video, self.auto_rotate, self._refusal, previous
                )
            else:
                self._refusal(reason)
        return self.current

    def _backend(self) -> Backend | None:
        if not self._tried:
            self._tried = True
            reasons = []
            for name in self.names:
                try:
                    self.backend = BACKENDS[name](self.gpu)
                    log.info("%s: decoding on %s", self.name, self.backend.describe())
                    break
                except DeviceDecoderUnavailable as exc:
                    reasons.append(f"{name}: {exc}")
            if self.backend is None and reasons:
                self._refusal("; ".join(reasons))
        return self.backend

    def _refusal(self, reason: str) -> None:
        """Once per reason per source: auto's expected fallbacks at info, an asked-for
        decoder's at warning."""
        self.refused = reason
        if reason in self._told:
            return
        self._told.add(reason)
        level = logging.INFO if self.auto else logging.WARNING
        log.log(level, "%s: decoding in software (%s)", self.name, reason)
