"""The ``live`` node: each source's annotated (and, behind a redact node, redacted) frames as a
live H.264 stream, encoded once per source whoever watches: over RTSP at
``rtsp://HOST:PORT/SOURCE_ID`` (VLC, ffplay, Home Assistant's generic camera, a recorder),
and in the service's page (``run-pipeline serve``) as fragmented MP4. A stream is drawn and
encoded only while someone watches it; viewers never slow the pipeline."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.media.live import LiveSettings, LiveStream
from vapipe.stages.media.rtsp_out import RtspServer, RtspSettings

log = logging.getLogger(__name__)


class LiveConfig(StageConfig):
    """How the live streams are served and encoded."""

    rtsp_port: int = Field(8554, ge=0, le=65535)
    """The RTSP server's port (0: any free one, logged and in the run's stats)."""
    rtsp: bool = True
    """Serve the streams over RTSP (needs GStreamer's RTSP server for the system Python:
    ``run-pipeline doctor`` says whether it is there). ``false``: only the service's page
    shows them."""
    rtsp_host: str = "127.0.0.1"
    """The address the RTSP server listens on: ``0.0.0.0`` for other machines (then set a
    login)."""
    rtsp_user: str | None = None
    """With ``rtsp_password``: clients must log in (basic authentication)."""
    rtsp_password: str | None = None
    """With ``rtsp_user``: the password clients must give (never logged)."""
    python: str | None = None
    """The Python that runs GStreamer's RTSP server; default: $VAPIPE_GST_PYTHON, else
    /usr/bin/python3, else python3 on the PATH."""
    width: int = Field(1280, ge=64, le=7680)
    """The most a stream is wide (scaled down, aspect kept)."""
    fps: float = Field(15.0, gt=0, le=120)
    """The most pictures a second a stream carries (the source's rate if lower)."""
    bitrate: int = Field(2_000_000, ge=50_000)
    """Bits per second of each stream."""
    keyframe_s: float = Field(1.0, gt=0, le=10)
    """Seconds between keyframes (a viewer that fell behind resumes at the next one)."""
    draw: bool = True
    """Draw boxes, labels, lines and zones as the video sink does; ``false``: the pictures as
    they are (redacted, behind a redact node)."""
    viewer_queue: int = Field(30, ge=2, le=1000)
    """Pictures a viewer of the page may fall behind before it skips to the next keyframe."""


@register("live")
class LiveSink(Stage):
    """Offers each frame to its source's live stream; passes frames on unchanged."""

    Config = LiveConfig
    config: LiveConfig

    @classmethod
    def writes_pictures(cls, config: LiveConfig) -> bool:
        return True

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.settings = LiveSettings(
            width=cfg.width, fps=cfg.fps, keyframe_s=cfg.keyframe_s, bitrate=cfg.bitrate,
            draw=cfg.draw, queue=cfg.viewer_queue,
        )  # fmt: skip
        self.streams: dict[str, LiveStream] = {}
        self.server: RtspServer | None = None
        self.shown_host = cfg.rtsp_host or "0.0.0.0"
        if cfg.rtsp:
            login = None
            if cfg.rtsp_user is not None or cfg.rtsp_password is not None:
                login = f"{cfg.rtsp_user or ''}:{cfg.rtsp_password or ''}"
            self.server = RtspServer(
                RtspSettings(cfg.rtsp_host, cfg.rtsp_port, login, cfg.python),
                list(context.source_ids),
                self._keyframe_wanted,
            )
            for source_id in context.source_ids:
                log.info(
                    "%s: live stream at rtsp://%s:%d/%s",
                    self.name, self.shown_host, self.server.port, source_id,
                )  # fmt: skip

    def stream(self, source_id: str) -> LiveStream:
        """The source's stream (made at its first frame, or when first watched)."""
        live = self.streams.get(source_id)
        if live is None:
            server = self.server
            if server is not None and source_id not in server.watchers:
                server.add_mount(source_id)  # a stream added to a running service
                log.info("%s: live stream at rtsp://%s:%d/%s", self.name,
                         self.shown_host, server.port, source_id)  # fmt: skip
            live = self.streams[source_id] = LiveStream(
                source_id,
                self.settings,
                watchers=(lambda: server.watchers.get(source_id, 0)) if server else lambda: 0,
                on_unit=server.send if server else None,
            )
        return live

    def _keyframe_wanted(self, source_id: str) -> None:
        live = self.streams.get(source_id)
        if live is not None:
            live.keyframe_wanted()

    def process(self, frame: Frame) -> tuple[Frame]:
        self.stream(frame.source_id).offer(frame)
        return (frame,)

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":
            live = self.streams.pop(message.source_id, None)
            if live is not None:
                live.close()
        return (message,)

    def close(self) -> None:
        for live in self.streams.values():
            live.close()
        if self.server is not None:
            self.server.close()

    def stats(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            source_id: live.stats() for source_id, live in self.streams.items()
        }
        if self.server is not None:
            entry["rtsp_port"] = self.server.port
            entry["rtsp_dropped"] = self.server.dropped
        return entry
