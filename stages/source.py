"""Decoded frames from a file, a still image or any URL FFmpeg opens, through PyAV."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
from pydantic import Field

from pipeline.assets import resolve_media
from pipeline.errors import ConfigError, PipelineError
from pipeline.frame import Frame, StreamInfo
from pipeline.registry import register
from pipeline.stage import SourceStage, StageConfig, StageContext
from pipeline.urls import mask_credentials

log = logging.getLogger(__name__)

STILL_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")


class SourceConfig(StageConfig):
    uri: str
    """A file path, ``sample:NAME`` (people, traffic, horses, dog), or any URL FFmpeg opens."""
    source_id: str | None = None
    """Name carried by every frame and event; default: the node's name."""
    decode_threads: int = Field(0, ge=0)
    """FFmpeg decoder threads; 0 = automatic."""
    options: dict[str, str] = Field(default_factory=dict)
    """Extra FFmpeg demuxer options, passed to ``av.open``."""


@register("source")
class FileSource(SourceStage):
    """Frames of one video file or still image, in decode order, ``seq`` from 0."""

    Config = SourceConfig
    config: SourceConfig

    def __init__(self, name: str, config: SourceConfig) -> None:
        super().__init__(name, config)
        self._stop = threading.Event()

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.source_id = cfg.source_id or self.name
        self.path = resolve_media(cfg.uri)
        self.display_uri = mask_credentials(self.path)
        is_local = "://" not in self.path
        if is_local and not os.path.exists(self.path):
            raise ConfigError(f"input not found: {self.display_uri}", key="uri")
        try:
            self.container = av.open(self.path, options=cfg.options)
        except av.error.FFmpegError as exc:
            raise PipelineError(
                f"cannot open {self.display_uri}: {mask_credentials(str(exc))}"
            ) from None
        if not self.container.streams.video:
            self.container.close()
            raise PipelineError(f"{self.display_uri} has no video stream")
        self.video = self.container.streams.video[0]
        self.video.thread_type = "AUTO"
        if cfg.decode_threads:
            self.video.thread_count = cfg.decode_threads
        still = self.path.lower().endswith(STILL_IMAGE_SUFFIXES)
        rate = self.video.average_rate or self.video.guessed_rate
        count = 1 if still else (self.video.frames or None)
        duration = None
        if self.video.duration is not None and self.video.time_base is not None:
            duration = float(self.video.duration * self.video.time_base)
        self.stream_info = StreamInfo(
            source_id=self.source_id,
            uri=self.display_uri,
            width=self.video.codec_context.width,
            height=self.video.codec_context.height,
            rate=Fraction(rate) if rate else None,
            frame_count=count,
            duration_s=duration,
            live=False,
        )
        log.info(
            "%s: %s %dx%d %s fps, %s frames",
            self.name,
            self.display_uri,
            self.stream_info.width,
            self.stream_info.height,
            f"{float(rate):.3f}" if rate else "?",
            count or "?",
        )

    def total_frames(self) -> int | None:
        return self.stream_info.frame_count

    def frames(self) -> Iterator[Frame]:
        seq = 0
        skipped = 0
        rate = self.stream_info.rate
        for packet in self.container.demux(self.video):
            if self._stop.is_set():
                return
            try:
                decoded = packet.decode()
            except av.error.InvalidDataError as exc:
                skipped += 1
                log.warning("%s: skipped a corrupt packet (%s)", self.name, exc)
                continue
            for picture in decoded:
                yield self._frame(picture, seq, rate)
                seq += 1
        if skipped:
            log.warning("%s: %d corrupt packets skipped", self.name, skipped)

    def _frame(self, picture: Any, seq: int, rate: Fraction | None) -> Frame:
        if picture.pts is not None and picture.time_base is not None:
            pts = float(picture.pts * picture.time_base)
        else:
            pts = seq / float(rate) if rate else 0.0
        return Frame(
            source_id=self.source_id,
            seq=seq,
            pts=pts,
            capture_time=time.time(),
            image=picture.to_ndarray(format="bgr24"),
            stream=self.stream_info,
        )

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        container = getattr(self, "container", None)
        if container is not None:
            container.close()
