"""Decoded frames from a file, still image, network stream (RTSP...) or webcam, via PyAV.

Files are read once (or looped, or paced in real time). Live inputs never end on their own:
a camera that drops, stalls (the socket stays open but frames stop) or never answers is
reopened with exponential backoff, and ``source_down`` / ``source_up`` messages travel to the
events sink. ``seq`` counts on across reconnects and ``pts`` never goes backwards.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, Literal

import av
from pydantic import Field

from vapipe.pipeline.assets import local_media, resolve_media
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import SourceStage, StageConfig, StageContext
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.source.backoff import Backoff, ReconnectConfig
from vapipe.stages.source.inputs import InputSpec, input_spec, is_network, webcam_device

log = logging.getLogger(__name__)

STILL_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
NETWORK_ERRORS = (av.error.FFmpegError, OSError, TimeoutError)


class SourceConfig(StageConfig):
    """The input, how it is opened, and how a live one is kept alive."""

    uri: str
    """A file path, ``sample:NAME`` (people, traffic, horses, dog), ``rtsp://...`` (any URL
    FFmpeg opens), or a webcam: ``webcam:0`` or ``/dev/video0``."""
    source_id: str | None = None
    """Name carried by every frame and event; default: the node's name."""
    live: bool | None = None
    """Treat as a live source (leaky queues, reconnects); default: true for network URLs and
    webcams, false for files."""
    realtime: bool = False
    """Files: deliver frames at their timestamps' pace, like a camera."""
    loop: bool = False
    """Files: start again at the end (seq and pts keep counting)."""
    transport: Literal["tcp", "udp"] = "tcp"
    """RTSP transport. TCP survives lossy networks; UDP has less latency."""
    open_timeout_s: float = Field(10.0, gt=0)
    """Give up opening a network stream or webcam after this long."""
    read_timeout_s: float = Field(5.0, gt=0)
    """Give up a read that returns nothing for this long (a server that accepts and is silent)."""
    stall_timeout_s: float = Field(5.0, gt=0)
    """Reconnect when packets arrive but no frame has decoded for this long."""
    low_latency: bool = True
    """A small demuxer delay and reorder window on network streams (``flags=low_delay``,
    ``max_delay``)."""
    reconnect: ReconnectConfig = Field(default_factory=ReconnectConfig)
    """Backoff for live sources: ``initial_s``, ``max_s``, ``max_attempts`` (0 = forever),
    ``jitter``."""
    width: int | None = Field(None, gt=0)
    """Webcam capture width (with ``height``)."""
    height: int | None = Field(None, gt=0)
    """Webcam capture height."""
    fps: float | None = Field(None, gt=0)
    """Webcam frame rate."""
    pixel_format: str | None = None
    """Webcam pixel format as v4l2 names it (``mjpeg``, ``yuyv422``, ``h264``)."""
    decode_threads: int = Field(0, ge=0)
    """FFmpeg decoder threads; 0 = automatic."""
    options: dict[str, str] = Field(default_factory=dict)
    """Extra FFmpeg demuxer options, passed to ``av.open``."""


class StreamStalled(Exception):
    """Packets keep coming (or the socket stays open) but no frame decodes."""


@register("source")
class VideoSource(SourceStage):
    """Frames of one input, in decode order, ``seq`` from 0."""

    Config = SourceConfig
    config: SourceConfig

    def __init__(self, name: str, config: SourceConfig) -> None:
        super().__init__(name, config)
        self._stop = threading.Event()
        self.stream_info: StreamInfo | None = None
        self.reconnects = 0

    @classmethod
    def is_live(cls, config: SourceConfig) -> bool:  # type: ignore[override]
        if config.live is not None:
            return config.live
        return config.realtime or is_network(config.uri) or webcam_device(config.uri) is not None

    @classmethod
    def source_id_of(cls, name: str, config: SourceConfig) -> str:  # type: ignore[override]
        return config.source_id or name

    @classmethod
    def files_read(cls, config: SourceConfig) -> list[str]:  # type: ignore[override]
        local = local_media(config.uri)
        if local is None or is_network(local) or webcam_device(local) is not None:
            return []
        return [local]

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.source_id = cfg.source_id or self.name
        self.live = self.is_live(cfg)
        self.spec = self._spec()
        self.display_uri = mask_credentials(self.spec.file)
        if self.spec.kind == "webcam":
            if not os.path.exists(self.spec.file):
                raise ConfigError(f"webcam not found: {self.spec.file}", key="uri")
        elif self.spec.kind == "file":
            if not os.path.exists(self.spec.file):
                raise ConfigError(f"input not found: {self.display_uri}", key="uri")
            # Files open now: a broken file fails the run before anything else starts.
            self._session = self._connect()
        if self.spec.kind != "file":
            av.logging.set_level(av.logging.ERROR)  # FFmpeg's own lines, masked by our handler
            self._session = None

    def _spec(self) -> InputSpec:
        cfg = self.config
        return input_spec(
            resolve_media(cfg.uri),
            transport=cfg.transport,
            open_timeout_s=cfg.open_timeout_s,
            read_timeout_s=cfg.read_timeout_s,
            low_latency=cfg.low_latency,
            width=cfg.width,
            height=cfg.height,
            fps=cfg.fps,
            pixel_format=cfg.pixel_format,
            extra=cfg.options,
        )

    def _connect(self) -> tuple[Any, Any]:
        """Open the input; returns (container, video stream) and sets ``stream_info``."""
        try:
            container = av.open(self.spec.file, **self.spec.open_kwargs())
        except NETWORK_ERRORS as exc:
            # FFmpeg's message repeats the URL; its strerror alone says what went wrong.
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise PipelineError(
                f"cannot open {self.display_uri}: {mask_credentials(reason)}"
            ) from None
        if not container.streams.video:
            container.close()
            raise PipelineError(f"{self.display_uri} has no video stream")
        video = container.streams.video[0]
        video.thread_type = "AUTO"
        if self.config.decode_threads:
            video.thread_count = self.config.decode_threads
        still = self.spec.file.lower().endswith(STILL_IMAGE_SUFFIXES)
        rate = video.average_rate or video.guessed_rate
        if self.spec.kind == "webcam" and self.config.fps:
            rate = Fraction(self.config.fps).limit_denominator(1001)
        count = 1 if still else (video.frames or None)
        self.stream_info = StreamInfo(
            source_id=self.source_id,
            uri=self.display_uri,
            width=video.codec_context.width,
            height=video.codec_context.height,
            rate=Fraction(rate) if rate else None,
            frame_count=None if (self.live or self.config.loop) else count,
            live=self.live,
        )
        log.info(
            "%s: %s %dx%d %s fps%s",
            self.name,
            self.display_uri,
            self.stream_info.width,
            self.stream_info.height,
            f"{float(rate):.3f}" if rate else "?",
            f", {count} frames" if count and not self.live else "",
        )
        return container, video

    def total_frames(self) -> int | None:
        return self.stream_info.frame_count if self.stream_info else None

    # -- reading ------------------------------------------------------------------------

    def frames(self) -> Iterator[Frame | Message]:
        self._seq = 0
        self._last_pts: float | None = None
        if self.spec.kind == "file":
            yield from self._file_frames()
        else:
            yield from self._live_frames()

    def _file_frames(self) -> Iterator[Frame]:
        session, self._session = self._session, None
        while session is not None and not self._stop.is_set():
            container, video = session
            try:
                yield from self._session_frames(container, video, paced=self.config.realtime)
            finally:
                container.close()
            session = self._connect() if self.config.loop and not self._stop.is_set() else None

    def _live_frames(self) -> Iterator[Frame | Message]:
        backoff = Backoff(self.config.reconnect)
        down_since: float | None = None
        reason = ""
        while not self._stop.is_set():
            try:
                container, video = self._connect()
            except PipelineError as exc:
                reason = str(exc)
                if down_since is None:
                    down_since = time.monotonic()
                    yield self._message("source_down", reason=reason, attempt=backoff.attempt)
                if backoff.exhausted():
                    raise PipelineError(
                        f"{self.display_uri}: gave up after {backoff.attempt} attempts: {reason}"
                    ) from None
                wait = backoff.next_wait()
                log.warning("%s: %s; retry %d in %.1f s", self.name, reason, backoff.attempt, wait)
                if self._stop.wait(wait):
                    return
                continue
            if down_since is not None:
                self.reconnects += 1
                yield self._message(
                    "source_up",
                    attempt=backoff.attempt,
                    down_s=round(time.monotonic() - down_since, 3),
                )
                down_since = None
            backoff.reset()
            try:
                yield from self._session_frames(container, video, paced=self.config.realtime)
                reason = "end of stream"
            except (StreamStalled, *NETWORK_ERRORS) as exc:
                reason = mask_credentials(str(exc)) or type(exc).__name__
            finally:
                container.close()
            if self._stop.is_set():
                return
            log.warning("%s: stream lost (%s); reconnecting", self.name, reason)
            down_since = time.monotonic()
            yield self._message("source_down", reason=reason, attempt=0)

    def _session_frames(self, container: Any, video: Any, paced: bool) -> Iterator[Frame]:
        """Frames of one open container, with pts made monotonic across sessions."""
        first_raw: float | None = None
        offset = 0.0
        started = time.monotonic()
        last_frame_at = time.monotonic()
        interval = (
            1 / float(self.stream_info.rate) if self.stream_info and self.stream_info.rate else 0.04
        )
        # Files cannot stall (a slow disk is not a dead camera).
        stall_s = None if self.spec.kind == "file" else self.config.stall_timeout_s
        # Every stream's packets pass through here, so a camera whose audio (or RTCP-fed
        # metadata) keeps flowing while its video stops is still caught by the stall check.
        for packet in container.demux():
            if self._stop.is_set():
                return
            now = time.monotonic()
            if stall_s is not None and now - last_frame_at > stall_s:
                raise StreamStalled(f"no frame for {now - last_frame_at:.1f} s")
            if packet.stream.index != video.index:
                continue
            try:
                pictures = packet.decode()
            except av.error.InvalidDataError as exc:
                log.warning("%s: skipped a corrupt packet (%s)", self.name, exc)
                continue
            for picture in pictures:
                raw = (
                    float(picture.pts * picture.time_base)
                    if picture.pts is not None and picture.time_base is not None
                    else self._seq * interval
                )
                if first_raw is None:
                    first_raw = raw
                    if self._last_pts is not None:
                        offset = self._last_pts + interval - raw
                    elif self.live:
                        offset = -raw  # live streams start at 0, whatever the camera's clock
                pts = raw + offset
                if self._last_pts is not None and pts <= self._last_pts:
                    pts = self._last_pts + 1e-6
                if paced:
                    delay = (pts - (first_raw + offset)) - (time.monotonic() - started)
                    if delay > 0 and self._stop.wait(delay):
                        return
                yield self._frame(picture, pts)
                # Counted from when downstream took the frame: time blocked on a full queue is
                # backpressure, not a stalled camera.
                last_frame_at = time.monotonic()

    def _frame(self, picture: Any, pts: float) -> Frame:
        frame = Frame(
            source_id=self.source_id,
            seq=self._seq,
            pts=pts,
            capture_time=time.time(),
            image=picture.to_ndarray(format="bgr24"),
            stream=self.stream_info,
        )  # type: ignore[arg-type]
        self._seq += 1
        self._last_pts = pts
        return frame

    def _message(self, kind: str, **data: Any) -> Message:
        return Message(
            source_id=self.source_id,
            kind=kind,
            time=time.time(),
            seq=self._seq - 1 if self._seq else None,
            pts=self._last_pts,
            data={"uri": self.display_uri, **data},
        )

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            session[0].close()

    def stats(self) -> dict[str, Any]:
        return {
            "uri": getattr(self, "display_uri", None),
            "live": getattr(self, "live", None),
            "reconnects": self.reconnects,
        }
