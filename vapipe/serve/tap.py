"""What a service (``run-pipeline serve``) shows of each stream: its latest frame (drawn and
encoded only when someone asks), its frame count and rate, its state from the source's
messages, and every event, handed to the live-events hub while anyone listens.

Not a stage to put in a config: the service links one in behind the last stage before the
sinks, so it sees what they see."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.serve.event_hub import EventHub
from vapipe.stages.events.records import frame_records, iso_time, message_record
from vapipe.stages.media.draw import annotated_jpeg
from vapipe.stages.media.live import LiveSettings, LiveStream

RATE_WINDOW_S = 5.0


@dataclass
class StreamView:
    """One stream as the service reports it."""

    frames: int = 0
    state: str = "opening"  # "running" after a frame, "reconnecting" after source_down
    last_event_time: str | None = None
    latest: Frame | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    arrivals: deque[float] = field(default_factory=lambda: deque(maxlen=512))

    def fps(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        recent = [t for t in self.arrivals if now - t <= RATE_WINDOW_S]
        if len(recent) < 2:
            return 0.0
        return round((len(recent) - 1) / max(recent[-1] - recent[0], 1e-6), 2)


class ServiceTap(Stage):
    """Keeps each stream's view; passes nothing on."""

    type_name = "service-tap"
    reads_pixels = True  # the previews draw the frame, when asked

    def __init__(self, name: str, hub: EventHub) -> None:
        super().__init__(name, StageConfig())
        self.hub = hub
        self.views: dict[str, StreamView] = {}
        self.live: dict[str, LiveStream] = {}
        """The page's live videos, by stream, each made when first watched (without a
        ``live`` node in the graph)."""
        self._lock = threading.Lock()

    @classmethod
    def writes_pictures(cls, config: Any) -> bool:
        return True  # previews, snapshots and live streams of what it sees

    def view(self, source_id: str) -> StreamView:
        with self._lock:
            return self.views.setdefault(source_id, StreamView())

    def process(self, frame: Frame) -> tuple[()]:
        view = self.view(frame.source_id)
        view.frames += 1
        view.arrivals.append(time.monotonic())
        view.latest = frame
        live = self.live.get(frame.source_id)
        if live is not None:
            live.offer(frame)
        view.state = "running"
        view.last_event_time = iso_time(frame.capture_time)
        if frame.analytics is not None:
            view.counts = frame.analytics.summary
        if self.hub.listening:
            for record in frame_records(frame):
                self.hub.publish(record)
        return ()

    def handle_message(self, message: Message) -> tuple[()]:
        view = self.view(message.source_id)
        if message.kind == "source_down":
            view.state = "reconnecting"
        elif message.kind == "source_up":
            view.state = "running"
        self.hub.publish(message_record(message))
        if message.kind == "source_removed":
            with self._lock:
                self.views.pop(message.source_id, None)
                live = self.live.pop(message.source_id, None)
            if live is not None:
                live.close()
        return ()

    def live_stream(self, source_id: str) -> LiveStream:
        with self._lock:
            live = self.live.get(source_id)
            if live is None:
                live = self.live[source_id] = LiveStream(source_id, LiveSettings())
            return live

    def live_stats(self) -> dict[str, Any]:
        with self._lock:
            streams = dict(self.live)
        return {source_id: live.stats() for source_id, live in streams.items()}

    def close(self) -> None:
        with self._lock:
            streams, self.live = list(self.live.values()), {}
        for live in streams:
            live.close()

    def forget(self, source_id: str) -> None:
        with self._lock:
            self.views.pop(source_id, None)


def render(frame: Frame, width: int, quality: int = 80) -> bytes:
    """The frame annotated as the video sink draws it, ``width`` wide, as JPEG."""
    return annotated_jpeg(frame, width, quality)
