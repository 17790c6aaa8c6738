"""The source's encoded video packets, handed as they are demuxed to the stages downstream
that keep them (the clips sink: pre-roll without re-encoding). Each carries its time on the
frames' ``pts`` line, so a packet and the frame decoded from it agree."""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any

import av

from vapipe.pipeline.frame import EncodedPacket, EncodedStream
from vapipe.pipeline.stage import PacketConsumer

log = logging.getLogger(__name__)

MAX_PENDING = 2000
"""Packets held while a session's first frame has not decoded yet (their times are not known
before it); a camera that sends more without a picture loses the oldest."""


def encoded_stream(video: Any, session: int) -> EncodedStream | None:
    """The stream's codec parameters, kept in a container of their own (the input's may close
    before a clip is written): what a remuxer copies them from."""
    try:
        holder = av.open(io.BytesIO(), "w", format="mp4")
        template = holder.add_stream_from_template(video)
    except (av.error.FFmpegError, ValueError) as exc:  # a codec MP4 cannot hold
        log.warning("packets of %s cannot be kept for clips: %s", video.codec_context.name, exc)
        return None
    return EncodedStream(session, holder, template, video.time_base)


class PacketFeed:
    """One source's packets to the stages that take them (with none, it does nothing)."""

    def __init__(self, source_id: str, consumers: Sequence[PacketConsumer]) -> None:
        self.source_id = source_id
        self.taps = list(consumers)
        self.stream: EncodedStream | None = None
        self.sessions = 0
        self._pending: list[tuple[bytes, int, int, bool]] = []

    def new_session(self, video: Any) -> None:
        self.sessions += 1
        self.stream = encoded_stream(video, self.sessions) if self.taps else None
        self._pending = []

    def add(self, packet: Any, offset: float | None) -> None:
        """A demuxed packet of the video stream; ``offset`` is the timeline's (frame pts minus
        container pts), None until the session's first frame decoded."""
        if self.stream is None or packet.size == 0:
            return
        raw_pts = packet.pts if packet.pts is not None else packet.dts
        if raw_pts is None:
            return
        raw_dts = packet.dts if packet.dts is not None else raw_pts
        self._pending.append((bytes(packet), raw_pts, raw_dts, bool(packet.is_keyframe)))
        if offset is None:
            del self._pending[:-MAX_PENDING]
            return
        self.flush(offset)

    def flush(self, offset: float | None) -> None:
        stream = self.stream
        if stream is None or offset is None:
            return
        base = float(stream.time_base)
        for data, raw_pts, raw_dts, keyframe in self._pending:
            item = EncodedPacket(data, raw_pts, raw_dts, keyframe, raw_pts * base + offset, stream)
            for tap in self.taps:
                tap.take_packet(self.source_id, item)
        self._pending = []
