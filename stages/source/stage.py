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
from typing import Any

import av

from vapipe.pipeline.device_picture import DeviceNV12
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.source.backoff import Backoff
from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.declared import ConfiguredSource
from vapipe.stages.source.decoded import DecodedI420
from vapipe.stages.source.hardware import DecoderChoice
from vapipe.stages.source.images import image_paths
from vapipe.stages.source.inputs import (
    check_delivered,
    input_spec,
    spec_of,
)
from vapipe.stages.source.opening import (
    NETWORK_ERRORS,
    Connector,
    call_or_stop,
    decoder_share,
    plain_i420,
    upright,
)
from vapipe.stages.source.packets import PacketFeed
from vapipe.stages.source.stall import StreamStalled, stalled_for
from vapipe.stages.source.timeline import Timeline

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.04  # one frame of a stream that does not say its rate


@register("source")
class VideoSource(ConfiguredSource):
    """Frames of one input, in decode order, ``seq`` from 0."""

    Config = SourceConfig
    config: SourceConfig
    live: bool | None = None  # known once open
    _session: Any = None

    def __init__(self, name: str, config: SourceConfig) -> None:
        super().__init__(name, config)
        self._stop = threading.Event()
        self.last_error: str | None = None  # why the live input is not open now, one line
        self.stream_info: StreamInfo | None = None
        self.source_id = config.source_id or name
        self.display_uri = mask_credentials(config.uri)  # the file it resolved to, once open
        self.reconnects = self.decode_errors = self.announced = self._seq = 0
        self._resume: tuple[int, float | None, float | None] | None = None
        self.timeline = Timeline(live=False, interval=DEFAULT_INTERVAL_S)
        self.decode_threads = 0
        self.yuv_frames = 0
        self._skip_until = 0
        self._images: list[str] | None = None
        self.packets = PacketFeed(name, [])
        self.decoders = DecoderChoice(name, config)

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.decode_threads = cfg.decode_threads or decoder_share(context.sources_in_run)
        self.live = self.is_live(cfg)
        self.spec = spec_of(cfg)
        self.display_uri = mask_credentials(self.spec.file)
        self.connector = Connector(self.name, self.source_id, cfg, self.live, self.decode_threads)
        self.packets = PacketFeed(self.source_id, context.packet_consumers)
        self._images = image_paths(self.spec.file)
        if self._images is not None:
            if not self._images:
                raise ConfigError(f"no images in {self.display_uri}", key="uri")
            self._session = None
            return
        if self.spec.kind == "webcam":
            if not os.path.exists(self.spec.file):
                raise ConfigError(f"webcam not found: {self.spec.file}", key="uri")
        elif self.spec.kind == "file" and not os.path.exists(self.spec.file):
            raise ConfigError(f"input not found: {self.display_uri}", key="uri")
        if self.spec.kind == "file" or (self.spec.kind == "url" and not self.live):
            # Files open now: a broken file fails the run before anything else starts.
            self._session = self._connect()
        else:
            # PyAV's logging stays off (its default): its callback takes the GIL from FFmpeg's
            # decoder threads, and closing a frame-threaded decoder then deadlocks (seen after
            # --max-frames on RTSP). Errors reach the user through the exceptions instead.
            self._session = None

    def _connect(self) -> tuple[Any, Any]:
        """Open the input; returns (container, video stream) and sets ``stream_info``."""
        container, video, self.stream_info = self.connector.open(self.spec, self.display_uri)
        return container, video

    def total_frames(self) -> int | None:
        if self._images is not None:
            return len(self._images)
        return self.stream_info.frame_count if self.stream_info else None

    # -- reading ------------------------------------------------------------------------

    def resume_from(self, seq: int, pts: float | None, wall: float | None = None) -> None:
        self._resume = (seq, pts, wall)

    def frames(self) -> Iterator[Frame | Message]:
        self._seq = 0
        self.timeline = Timeline(live=bool(self.live), interval=self._interval())
        replayable = (
            self._images is not None
            or self.spec.kind == "file"
            or (self.spec.kind == "url" and not self.live)
        )
        if self._resume is not None:
            if replayable:  # read again from the start; frames already delivered are skipped
                self._skip_until = self._resume[0]
            else:  # a camera goes on from now, numbered and timed after what was delivered
                self._seq = self._resume[0]
                self.timeline.resume(self._resume[1], self._resume[2])
        if self._images is not None:
            yield from self._image_frames(self._images)
        elif replayable:
            yield from self._file_frames()
        else:
            yield from self._live_frames()

    def _file_frames(self) -> Iterator[Frame]:
        session, self._session = self._session, None
        while session is not None and not self._stop.is_set():
            container, video = session
            first = self._seq
            announced = video.frames  # PyAV 19 refuses to read it once the file is closed
            try:
                yield from self._session_frames(container, video, paced=self.config.realtime)
            finally:
                container.close()
            if not self._stop.is_set():
                self._account(self._seq - first, announced)
            session = self._connect() if self.config.loop and not self._stop.is_set() else None

    def _image_frames(self, paths: list[str]) -> Iterator[Frame]:
        """Each picture once, ``fps`` apart in pts (1 per second unless set)."""
        interval = 1.0 / (self.config.fps or 1.0)
        for index, path in enumerate(paths):
            if self._stop.is_set():
                return
            if self._seq < self._skip_until:
                self._seq += 1
                continue
            self.spec = input_spec(path)
            try:
                container, video = self._connect()
            except PipelineError as exc:
                self.decode_errors += 1
                log.warning("%s: skipped %s (%s)", self.name, path, exc)
                continue
            try:
                picture = next(container.decode(video), None)
            except av.error.FFmpegError as exc:
                picture = None
                log.warning("%s: skipped %s (%s)", self.name, path, exc)
            finally:
                container.close()
            if picture is None:
                self.decode_errors += 1
                continue
            # Pictures are timed by their place in the list, not by the timeline's sessions.
            self.timeline.last_pts = index * interval
            yield self._frame(picture, index * interval)
        self._account(self._seq, len(paths))

    def _account(self, delivered: int, announced: int) -> None:
        self.announced += announced
        check_delivered(self.name, self.display_uri, delivered, announced, self.decode_errors)

    def _live_frames(self) -> Iterator[Frame | Message]:
        backoff = Backoff(self.config.reconnect)
        down_since: float | None = None
        reason = ""
        while not self._stop.is_set():
            asked_at = time.time()
            try:
                session = self._connect_or_stop()
            except PipelineError as exc:
                backoff.failed()
                reason = str(exc)
                self.last_error = " ".join(mask_credentials(reason).split())
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
            if session is None:  # stopped while connecting
                return
            container, video = session
            self.last_error = None
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
                yield from self._session_frames(
                    container, video, paced=self.config.realtime, asked_at=asked_at
                )
                reason = "end of stream"
            except (StreamStalled, *NETWORK_ERRORS) as exc:
                reason = mask_credentials(str(exc)) or type(exc).__name__
            finally:
                container.close()
            if self._stop.is_set():
                return
            self.last_error = " ".join(reason.split())
            log.warning("%s: stream lost (%s); reconnecting", self.name, reason)
            down_since = time.monotonic()
            yield self._message("source_down", reason=reason, attempt=0)

    def _connect_or_stop(self) -> tuple[Any, Any] | None:
        """``_connect``, given up as soon as the source is asked to stop (None)."""
        return call_or_stop(self._connect, self._stop, f"{self.name}-open")

    def _interval(self) -> float:
        """One frame, in seconds, by the stream's rate."""
        rate = self.stream_info.rate if self.stream_info else None
        return 1 / float(rate) if rate else DEFAULT_INTERVAL_S

    def _session_frames(
        self, container: Any, video: Any, paced: bool, asked_at: float | None = None
    ) -> Iterator[Frame]:
        """Frames of one open container, timed by the source's timeline (timeline.py); a
        camera's session began when it was ``asked_at`` (time.time())."""
        self.timeline.interval = self._interval()
        self.timeline.new_session(asked_at)
        self.packets.new_session(video)
        decoder = self.decoders.for_session(video)
        first_pts: float | None = None
        started = time.monotonic()
        last_frame_at = last_video_at = opened_at = time.monotonic()
        # Files cannot stall (a slow disk is not a dead camera).
        stall_s = None if self.spec.kind == "file" else self.config.stall_timeout_s
        # Every stream's packets pass through here, so a camera whose audio (or RTCP-fed
        # metadata) keeps flowing while its video stops is still caught by the stall check.
        for packet in container.demux():
            if self._stop.is_set():
                return
            now = time.monotonic()
            if stall_s is not None:
                stalled_for(now, first_pts is not None, last_frame_at, last_video_at, opened_at,
                            stall_s, self.config.first_frame_timeout_s)  # fmt: skip
            if packet.stream.index != video.index:
                continue
            last_video_at = now
            if first_pts is None and packet.pts is not None and packet.time_base is not None:
                self.timeline.first_packet(float(packet.pts * packet.time_base))
            self.packets.add(packet, self.timeline.offset)
            try:
                pictures = decoder.decode(packet)
            except av.error.InvalidDataError as exc:
                self.decode_errors += 1
                if self.decode_errors == 1:
                    log.warning("%s: skipped a corrupt packet (%s); counting", self.name, exc)
                continue
            for picture in pictures:
                raw = seconds(picture.pts, picture.time_base)
                pts = self.timeline.place(raw)
                if first_pts is None:
                    first_pts = pts
                    self.packets.flush(self.timeline.offset)  # those that came before it
                if self._seq < self._skip_until:
                    self._seq += 1
                    started = time.monotonic() - (pts - first_pts)
                    continue
                if paced:
                    delay = (pts - first_pts) - (time.monotonic() - started)
                    if delay > 0 and self._stop.wait(delay):
                        return
                yield self._frame(picture, pts)
                # Counted from when downstream took the frame: time blocked on a full queue is
                # backpressure, not a stalled camera.
                last_frame_at = time.monotonic()

    def _frame(self, picture: Any, pts: float) -> Frame:
        planes: DecodedI420 | DeviceNV12 | None = (
            picture if isinstance(picture, DeviceNV12) else None
        )
        # One colour conversion on every path: plain 4:2:0 pictures travel as I420 (in the
        # decoder's planes until read) and become BGR with OpenCV's BT.601 arithmetic
        # (Frame.image, on first read), which is also what the OpenCL kernel does; the others
        # are converted here by swscale, with their own matrix and range, for every stage alike.
        if planes is None and plain_i420(picture, self.config.auto_rotate):
            planes = DecodedI420(picture)
        self.yuv_frames += planes is not None
        if self.stream_info is None:
            raise PipelineError(f"{self.display_uri}: a frame came before its stream opened")
        frame = Frame(
            source_id=self.source_id,
            seq=self._seq,
            pts=pts,
            capture_time=time.time(),
            # None: made from ``yuv`` when first read (Frame.image is a property over it).
            image=None if planes is not None else upright(picture, self.config.auto_rotate),  # type: ignore[arg-type]
            stream=self.stream_info,
            planes=planes,
        )
        self._seq += 1
        return frame

    def _message(self, kind: str, **data: Any) -> Message:
        return Message(
            source_id=self.source_id,
            kind=kind,
            time=time.time(),
            seq=self._seq - 1 if self._seq else None,
            pts=self.timeline.last_pts,
            data={"uri": self.display_uri, **data},
        )

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self._session is not None:
            self._session[0].close()

    def stats(self) -> dict[str, Any]:
        hwaccel = self.config.hwaccel and not self.connector.hwaccel_failed
        ffmpeg = f"hwaccel {self.config.hwaccel}" if hwaccel else "software"
        return {
            "uri": self.display_uri,
            "live": self.live,
            "reconnects": self.reconnects,
            "frames_announced": self.announced or None,
            "decode_errors": self.decode_errors,
            "decoder": self.decoders.describe() if self.decoders.names else ffmpeg,
            "decode_threads": self.decode_threads or "auto",
            "frames_as_yuv420": self.yuv_frames,
            "clock_restarts": self.timeline.discontinuities,
        }


def seconds(pts: int | None, time_base: Any) -> float | None:
    """``float(pts * time_base)`` without the two Fraction objects a frame (a few
    microseconds under the interpreter lock in every source thread): an int's true division is
    correctly rounded, as ``Fraction.__float__`` is, so the float is the same, bit for bit."""
    if pts is None or time_base is None:
        return None
    return pts * time_base.numerator / time_base.denominator
