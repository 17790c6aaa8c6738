"""Opening an input (its container, video stream and what it says of itself, on a hardware
decoder where asked), an open that Ctrl-C can abandon, and pictures turned upright."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import av
import numpy as np

from vapipe.pipeline import lingering
from vapipe.pipeline.cpus import usable_cores
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import StreamInfo
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.source.config import DEVICE_DECODERS, SourceConfig
from vapipe.stages.source.images import IMAGE_SUFFIXES
from vapipe.stages.source.inputs import InputSpec

log = logging.getLogger(__name__)

T = TypeVar("T")
NETWORK_ERRORS = (av.error.FFmpegError, OSError, TimeoutError)


class Connector:
    """Opens one source's inputs: ``open`` gives (container, video stream, StreamInfo). A
    hardware decoder that fails once is not asked again."""

    def __init__(
        self, name: str, source_id: str, config: SourceConfig, live: bool, threads: int
    ) -> None:
        self.name, self.source_id, self.config = name, source_id, config
        self.live, self.threads = live, threads
        self.hwaccel_failed = False

    def open(self, spec: InputSpec, display_uri: str) -> tuple[Any, Any, StreamInfo]:
        """``display_uri`` (credentials masked) names the source in errors and StreamInfo: a
        folder of pictures is one source, whichever picture is opened."""
        try:
            container = self._open_container(spec)
        except NETWORK_ERRORS as exc:
            # FFmpeg's message repeats the URL; its strerror alone says what went wrong.
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            reason = mask_credentials(reason) + transport_hint(spec, reason)
            raise PipelineError(f"cannot open {display_uri}: {reason}") from None
        if not container.streams.video:
            container.close()
            raise PipelineError(f"{display_uri} has no video stream")
        video = container.streams.video[0]
        if video.codec_context is None:  # FFmpeg knows the container, not the codec
            container.close()
            raise PipelineError(
                f"{display_uri}: its video codec cannot be decoded here "
                "(no decoder for it in this FFmpeg); convert it, e.g. to H.264"
            )
        video.thread_type = "AUTO"
        video.thread_count = self.threads
        still = spec.file.lower().endswith(IMAGE_SUFFIXES)
        rate = video.average_rate or video.guessed_rate
        if spec.kind == "webcam" and self.config.fps:
            rate = Fraction(self.config.fps).limit_denominator(1001)
        count = 1 if still else (video.frames or None)
        info = StreamInfo(
            source_id=self.source_id,
            uri=display_uri,
            width=video.codec_context.width,
            height=video.codec_context.height,
            rate=Fraction(rate) if rate else None,
            frame_count=None if (self.live or self.config.loop) else count,
            live=self.live,
        )
        log.info(
            "%s: %s %dx%d %s fps%s",
            self.name,
            display_uri,
            info.width,
            info.height,
            f"{float(rate):.3f}" if rate else "?",
            f", {count} frames" if count and not self.live else "",
        )
        return container, video, info

    def _open_container(self, spec: InputSpec) -> Any:
        """``av.open``, decoding on the configured hardware device while it opens."""
        kwargs = spec.open_kwargs()
        cfg = self.config
        if cfg.hwaccel and cfg.hwaccel not in DEVICE_DECODERS and not self.hwaccel_failed:
            from av.codec.hwaccel import HWAccel

            try:
                accel = HWAccel(cfg.hwaccel, cfg.hwaccel_device, allow_software_fallback=True)
                return av.open(spec.file, **kwargs, hwaccel=accel)
            except (av.error.FFmpegError, OSError, ValueError) as exc:
                self.hwaccel_failed = True
                log.warning(
                    "%s: hwaccel %s cannot be used here (%s); decoding in software",
                    self.name,
                    cfg.hwaccel,
                    getattr(exc, "strerror", None) or exc,
                )
        return av.open(spec.file, **kwargs)


def transport_hint(spec: InputSpec, reason: str) -> str:
    """What to set when an RTSP server refuses the transport asked for: FFmpeg says only
    "Protocol not supported" (VLC's server, which serves RTP over UDP only, answers TCP's
    SETUP with 461 Unsupported transport)."""
    asked = spec.options.get("rtsp_transport")
    if asked is None or "not supported" not in reason.lower():
        return ""
    other = "udp" if asked == "tcp" else "tcp"
    return f' (the server refuses RTSP over {asked.upper()}: set transport = "{other}")'


def call_or_stop(call: Callable[[], T], stop: threading.Event, name: str) -> T | None:
    """``call()`` in a thread of its own; None as soon as ``stop`` is set. FFmpeg cannot be
    interrupted while it opens a URL, and Ctrl-C must not wait ``open_timeout_s``: the
    abandoned call ends by itself at its timeout and its result is dropped."""
    outcome: list[Any] = []

    def attempt() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)

    opener = lingering.watch(threading.Thread(target=attempt, name=name, daemon=True))
    opener.start()
    while opener.is_alive():
        if stop.wait(0.05):
            return None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


BT601_OR_UNSPECIFIED = {2, 5, 6}
"""AVColorSpace values whose pictures FFmpeg converts to BGR with BT.601 (2: unspecified)."""


def plain_i420(picture: Any, auto_rotate: bool) -> bool:
    """Whether the picture can travel as I420 planes and be converted as OpenCV does (BT.601,
    limited range, even size, nothing to rotate) without changing its colours."""
    return (
        picture.format.name == "yuv420p"
        and picture.width % 2 == 0
        and picture.height % 2 == 0
        and getattr(picture, "colorspace", 2) in BT601_OR_UNSPECIFIED
        and getattr(picture, "color_range", 0) != 2  # 2: full ("JPEG") range
        and not quarter_turns(picture, auto_rotate)
    )


def quarter_turns(picture: Any, auto_rotate: bool) -> int:
    """Counterclockwise quarter turns that make the picture upright (0 without auto_rotate)."""
    return round(getattr(picture, "rotation", 0) / 90) % 4 if auto_rotate else 0


def upright(picture: Any, auto_rotate: bool) -> np.ndarray:
    """The picture as BGR, as it is meant to be seen: phones record sideways and say so in
    the display matrix (degrees counterclockwise, FFmpeg's convention)."""
    image = picture.to_ndarray(format="bgr24")
    turns = quarter_turns(picture, auto_rotate)
    return np.ascontiguousarray(np.rot90(image, turns)) if turns else image


def decoder_share(sources: int) -> int:
    """Decoder threads for one of ``sources`` streams sharing this machine (0 = FFmpeg's own
    choice, one per core, for a single stream). Each frame thread holds a picture of its own:
    measured on 16 cores with 16 x 1080p, FFmpeg's choice took 99 MB per stream and decoded
    1,204 fps; 4 threads 54 MB and 1,348 fps. One thread decoded fastest alone (1,546 fps,
    34 MB) but slowed the whole pipeline (649 against 1,095 fps in 8 shards): a stream's
    decoder can then not use the cores other stages leave idle. So at least 4."""
    if sources <= 1:
        return 0
    cores = usable_cores()
    return min(cores, max(4, cores // sources))
