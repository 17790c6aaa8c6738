"""The ``track`` node: gives each detection the id of the object it belongs to, per source."""

from __future__ import annotations

from typing import Any

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageContext
from vapipe.stages.detections import Detections
from vapipe.stages.track.backtrace import ORIGINS_KEY
from vapipe.stages.track.base import Tracker
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import TrackConfig


@register("track")
class TrackStage(Stage):
    """Tracks objects across frames (ByteTrack, Kalman motion), one tracker per source.

    Another tracker plugs in as a subclass registered under its own type: override
    ``new_tracker`` (and ``Config`` for its keys; ``reads_pixels = True`` to get the image)."""

    reads_pixels = False

    Config = TrackConfig
    config: TrackConfig

    def open(self, context: StageContext) -> None:
        self.trackers: dict[str, Tracker] = {}

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":  # a service's stream: its tracks go with it
            self.trackers.pop(message.source_id, None)
        return (message,)

    def new_tracker(self) -> Tracker:
        """The tracker of one new source."""
        return ByteTracker(self.config)

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.detections is None and not frame.predicted:
            raise PipelineError("frame has no detections: link an nms node before this track node")
        tracker = self.trackers.get(frame.source_id)
        if tracker is None:
            tracker = self.trackers[frame.source_id] = self.new_tracker()
        if frame.detections is None:  # skipped by infer.interval: where the tracks are now
            coast = getattr(tracker, "coast", None)
            # Nothing moved (a motion node): the tracks stay where they were.
            still = bool(frame.meta.get("still"))
            frame.detections = coast(frame.pts, still=still) if coast else Detections.empty()
            return (frame,)
        image = frame.image if self.reads_pixels else None
        if hasattr(tracker, "frame_size"):  # ByteTracker: tracks lost at the edge go sooner
            height, width = frame.shape[:2]
            tracker.frame_size = (width, height)
        tracked = tracker.update(frame.detections, frame.pts, image)
        origins = getattr(tracker, "origins", None)
        if origins:  # where the tracks identified now were first seen (track.backtrace_s)
            frame.meta[ORIGINS_KEY] = origins
        if self.config.untracked == "drop":
            tracked = tracked[tracked.tracked()]
        frame.detections = tracked
        return (frame,)

    def stats(self) -> dict[str, Any]:
        trackers = getattr(self, "trackers", {})
        return {"tracks": {source: t.next_id - 1 for source, t in trackers.items()}}
