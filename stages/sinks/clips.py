"""The ``clips`` node: an MP4 of each analytics event, from ``pre_s`` before it to ``post_s``
after, copied from the source's own encoded packets (no re-encoding: the pre-roll is a ring
of the last seconds of packets, from the keyframe before). Events whose clips would overlap
share one. Placed before the event sinks, it puts the clip's path in the event, with where in
the clip the event is (``clip_at_s``). A clip is written once a frame past its end has come,
or when its camera goes down, its stream is removed or the run ends."""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import av
from pydantic import Field, field_validator

from vapipe.pipeline.frame import EncodedPacket, EncodedStream, Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.stages.media.drawn_clips import FrameRing, write_drawn
from vapipe.stages.media.files import file_stem, inside_folder, sub_folder
from vapipe.stages.sinks.media_sink import MediaConfig, MediaSink

log = logging.getLogger(__name__)

FRAGMENTED = {"movflags": "frag_keyframe+empty_moov+default_base_moof"}
LATENCY_S = 10.0
"""Packets kept beyond ``pre_s``: an event's frame reaches this node after the source has
demuxed on by the pipeline's latency."""


class ClipsConfig(MediaConfig):
    """Where the clips go, and how long they are."""

    path: str = "clips/{source_id}/{date}"
    """The folder inside ``dir`` (``{source_id}``, ``{date}``: the UTC day)."""
    pre_s: float = Field(5.0, ge=0, le=120)
    """Seconds before the event (from the keyframe at or before then)."""
    post_s: float = Field(5.0, ge=0, le=120)
    """Seconds after the event."""
    max_clip_s: float = Field(60.0, gt=0, le=3600)
    """A clip that events keep extending is closed at this length; the next event starts
    another."""
    annotated: bool = False
    """Encode the annotated frames (drawn as the video sink draws them) instead of copying
    the camera's packets: an x264 encoder per clip, on the writer thread, and the last
    ``pre_s`` of frames held in memory. Behind a ``redact`` node, clips are always encoded
    from the (redacted) frames, drawn only with this key."""
    crf: int = Field(23, ge=0, le=51)
    """x264 quality of annotated clips (lower is better and larger)."""

    _inside = field_validator("path")(inside_folder)


@dataclass
class Clip:
    path: str
    start: float
    end: float
    stream: EncodedStream | None
    """None for an annotated clip, whose ``frames`` are drawn and encoded."""
    packets: list[EncodedPacket] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    done: bool = False
    """Its packets are in, up to ``end``."""


def fill(clip: Clip, ring: Ring) -> None:
    """The ring's packets after the clip's last one (all from the keyframe before its start,
    for a new clip), up to the first past its end."""
    kept = [packet for packet in ring.since(clip.start) if packet.stream is clip.stream]
    after = 0
    if clip.packets:
        last = clip.packets[-1]
        after = next((i + 1 for i, packet in enumerate(kept) if packet is last), len(kept))
    clip.done = False
    for packet in kept[after:]:
        if packet.time > clip.end:
            clip.done = True
            break
        clip.packets.append(packet)


class Ring:
    """One source's packets of the last ``keep_s`` seconds, whole GOPs (each list starts at a
    keyframe), so that any moment in it can be copied from the keyframe before."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self.gops: deque[list[EncodedPacket]] = deque()

    def add(self, packet: EncodedPacket) -> None:
        if self.gops and packet.stream is not self.gops[-1][0].stream:
            self.gops.clear()  # a new connection: its packets cannot follow the old ones
        if packet.keyframe:
            self.gops.append([packet])
        elif self.gops:
            self.gops[-1].append(packet)
        # (packets before a stream's first keyframe decode to nothing: not kept)
        cutoff = packet.time - self.keep_s
        while len(self.gops) > 1 and self.gops[1][0].time <= cutoff:
            self.gops.popleft()

    def since(self, start: float) -> list[EncodedPacket]:
        """Every packet from the last keyframe at or before ``start`` (the oldest one kept, if
        none is that old)."""
        first = 0
        for index, gop in enumerate(self.gops):
            if gop[0].time <= start:
                first = index
        return [packet for gop in list(self.gops)[first:] for packet in gop]


def write_clip(path: Path, clip: Clip) -> None:
    """The packets as a fragmented MP4 (playable while written, and if the run dies), under a
    temporary name until complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    encoded = clip.stream
    if encoded is None:
        raise ValueError(f"{path}: a clip of packets without their stream")
    origin = min(packet.dts for packet in clip.packets)
    with av.open(str(partial), "w", format="mp4", options=FRAGMENTED) as output:
        stream = output.add_stream_from_template(encoded.template)
        for item in clip.packets:
            packet = av.Packet(item.data)
            packet.pts, packet.dts = item.pts - origin, item.dts - origin
            packet.time_base = encoded.time_base
            packet.is_keyframe = item.keyframe
            packet.stream = stream
            output.mux(packet)
    os.replace(partial, path)


@register("clips")
class ClipsSink(MediaSink[Clip]):
    """Keeps each source's last seconds of encoded packets and writes a clip around each
    analytics event; frames pass on with the clip's path in their events."""

    Config = ClipsConfig
    config: ClipsConfig

    def __init__(self, name: str, config: ClipsConfig) -> None:
        super().__init__(name, config)
        self.from_frames = config.annotated
        """Clips are encoded from the frames (annotated, or behind a redact node), not copied
        from the source's packets."""
        self.takes_packets = not self.from_frames
        self.reads_pixels = self.from_frames

    def behind_redaction(self) -> None:
        # The source's packets hold the original pictures: clips are made of the redacted
        # frames instead (an x264 encoder per clip, ``pre_s`` of frames held in memory).
        self.from_frames = True
        self.takes_packets = False
        self.reads_pixels = True

    def open(self, context: StageContext) -> None:
        self.open_media(self._write)
        self._lock = threading.Lock()
        self._rings: dict[str, Ring] = {}
        self._drawn: dict[str, FrameRing] = {}
        self._open: dict[str, list[Clip]] = {}
        self.without_packets = 0

    def take_packet(self, source_id: str, packet: EncodedPacket) -> None:
        with self._lock:
            ring = self._rings.get(source_id)
            if ring is None:
                ring = self._rings[source_id] = Ring(self.config.pre_s + LATENCY_S)
            ring.add(packet)
            for clip in self._open.get(source_id, []):
                if clip.done:
                    continue
                if packet.stream is not clip.stream or packet.time > clip.end:
                    clip.done = True  # (a reconnection ends a clip where it was)
                else:
                    clip.packets.append(packet)

    def process(self, frame: Frame) -> tuple[Frame]:
        if self.from_frames:
            self._keep_frame(frame)
        for index, event in enumerate(frame.events):
            if event["event"] in self.event_types:
                self._clip_for(frame, index)
        with self._lock:
            # A frame past a clip's end: no later event can join it, and its packets are in.
            for clip in list(self._open.get(frame.source_id, [])):
                if frame.pts > clip.end:
                    self._finish(frame.source_id, clip)
        return (frame,)

    def _keep_frame(self, frame: Frame) -> None:
        """Clips of frames: the frame joins its source's ring and the clips it falls in."""
        with self._lock:
            ring = self._drawn.get(frame.source_id)
            if ring is None:
                ring = self._drawn[frame.source_id] = FrameRing(self.config.pre_s)
            ring.add(frame)
            for clip in self._open.get(frame.source_id, []):
                if frame.pts <= clip.end:
                    clip.frames.append(frame)

    def _clip_for(self, frame: Frame, index: int) -> None:
        cfg = self.config
        event = frame.events[index]
        start, end = frame.pts - cfg.pre_s, frame.pts + cfg.post_s
        with self._lock:
            clips = self._open.setdefault(frame.source_id, [])
            clip = next(
                (c for c in clips if start <= c.end and end - c.start <= cfg.max_clip_s), None
            )
            if clip is not None:
                clip.end = max(clip.end, end)
            else:
                folder = sub_folder(cfg.path, frame.source_id, frame.capture_time)
                name = f"{folder}/{file_stem(frame.capture_time, frame.seq, event)}.mp4"
                clip = Clip(name, start, end, None)
                clips.append(clip)
            first = self._gather(clip, frame)
            if first is None:  # nothing to show (an image folder; a ring moved on)
                clips.remove(clip)
                self.without_packets += 1
                return
            files = frame.files_of(index)
            files.clip = clip.path
            files.clip_at_s = round(max(frame.pts - first, 0.0), 3)

    def _gather(self, clip: Clip, frame: Frame) -> float | None:
        """What the clip shows up to now (under the lock): the time of its first frame, or
        None when there is nothing."""
        if self.from_frames:
            if not clip.frames:
                drawn = self._drawn.get(frame.source_id)
                clip.frames = drawn.since(clip.start) if drawn is not None else []
            elif clip.frames[-1] is not frame:  # an extended clip that had passed its end
                clip.frames.append(frame)
            return clip.frames[0].pts if clip.frames else None
        ring = self._rings.get(frame.source_id)
        if ring is not None:
            if clip.stream is None:
                newest = ring.since(clip.start)
                clip.stream = newest[-1].stream if newest else None
            fill(clip, ring)
        return clip.packets[0].time if clip.packets else None

    def _finish(self, source_id: str, clip: Clip) -> None:
        """Hands the clip to the writer (under the lock)."""
        self._open[source_id].remove(clip)
        if not self.submit(clip):
            log.warning("%s: clip %s dropped (the writer fell behind)", self.name, clip.path)

    def _finish_all(self, source_id: str | None = None) -> None:
        with self._lock:
            for source, clips in list(self._open.items()):
                if source_id in (None, source):
                    for clip in list(clips):
                        self._finish(source, clip)

    def _write(self, clip: Clip) -> None:
        if clip.frames:
            write_drawn(self.root / clip.path, clip.frames, self.config.crf, self.config.annotated)
        else:
            write_clip(self.root / clip.path, clip)
        self.retention.add(clip.path)

    def handle_message(self, message: Message) -> tuple[Message]:
        # A camera that went down ends its clips there: the next session's packets never join
        # them, and one that never comes back (a service keeps it until it is removed) would
        # hold its last event's clip unwritten.
        if message.kind in ("source_down", "source_removed"):
            self._finish_all(message.source_id)
        if message.kind == "source_removed":
            with self._lock:
                self._rings.pop(message.source_id, None)
                self._drawn.pop(message.source_id, None)
        return (message,)

    def flush(self) -> tuple[()]:
        self._finish_all()  # the end of a file: its clips end with it
        return ()

    def close(self) -> None:
        if self.writer is not None:
            self._finish_all()
        self.close_writer()
