"""The ``track`` node: gives each detection the id of the object it belongs to, per source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vapipe.pipeline.assets import Kind, model_entry
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.track.appearance import AppearanceTracker, Embedder
from vapipe.stages.track.base import Backtracing, Coasting, EdgeAware, Tracker
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

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.embedder: Embedder | None = None
        if self.config.appearance is not None:  # crops of the detections: keep the pixels
            self.reads_pixels = True

    @classmethod
    def assets_needed(cls, config: TrackConfig) -> list[tuple[Kind, str]]:
        looks = config.appearance
        return [("models", looks.model)] if looks and model_entry(looks.model) else []

    def open(self, context: StageContext) -> None:
        self.trackers: dict[str, Tracker] = {}
        self._abilities: dict[str, Abilities] = {}
        looks = self.config.appearance
        if looks is not None and self.embedder is None:
            self.embedder = Embedder(self.name, looks, self.config.high_score).load()

    def close(self) -> None:
        if self.embedder is not None:  # kept: its count stays in the run's summary
            self.embedder.close()

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":  # a service's stream: its tracks go with it
            self.trackers.pop(message.source_id, None)
            self._abilities.pop(message.source_id, None)
        return (message,)

    def new_tracker(self) -> Tracker:
        """The tracker of one new source."""
        if self.config.appearance is not None:
            return AppearanceTracker(self.config)
        return ByteTracker(self.config)

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.detections is None and not frame.predicted:
            raise PipelineError("frame has no detections: link an nms node before this track node")
        tracker = self.trackers.get(frame.source_id)
        if tracker is None:
            tracker = self.trackers[frame.source_id] = self.new_tracker()
            self._abilities[frame.source_id] = Abilities.of(tracker)
        can = self._abilities[frame.source_id]
        if frame.detections is None:  # skipped by infer.interval: where the tracks are now
            # Nothing moved (a motion node): the tracks stay where they were.
            still = frame.motion is not None and frame.motion.still
            # ``is not None``: a tracker with no tracks has length 0, so it is falsy.
            frame.detections = (
                can.coast.coast(frame.pts, still=still)
                if can.coast is not None
                else Detections.empty().replace(track_id=np.zeros(0, np.int64))
            )
            return (frame,)
        # A subclass's tracker that reads pixels gets the BGR frame; appearance crops from the
        # decoded planes itself (its instance keeps the pixels without making a BGR frame).
        image = frame.image if type(self).reads_pixels else None
        if self.embedder is not None and isinstance(tracker, AppearanceTracker):
            tracker.found = self.embedder.vectors(frame)
        if can.edge is not None:  # tracks lost at the edge go sooner
            height, width = frame.shape[:2]
            can.edge.frame_size = (width, height)
        tracked = tracker.update(frame.detections, frame.pts, image)
        if can.backtrace is not None and can.backtrace.origins:
            # where the tracks identified now were first seen (track.backtrace_s)
            frame.track_origins = can.backtrace.origins
        if self.config.untracked == "drop":
            tracked = tracked[tracked.tracked()]
        frame.detections = tracked
        return (frame,)

    def stats(self) -> dict[str, Any]:
        trackers = self.__dict__.get("trackers", {})  # none before open
        stats: dict[str, Any] = {
            "tracks": {source: t.next_id - 1 for source, t in trackers.items()}
        }
        if self.embedder is not None:
            stats["appearance_crops"] = self.embedder.crops
        return stats


@dataclass(frozen=True)
class Abilities:
    """What one tracker can do beyond ``update``, checked once when it is made."""

    coast: Coasting | None
    edge: EdgeAware | None
    backtrace: Backtracing | None

    @classmethod
    def of(cls, tracker: Tracker) -> Abilities:
        return cls(
            tracker if isinstance(tracker, Coasting) else None,
            tracker if isinstance(tracker, EdgeAware) else None,
            tracker if isinstance(tracker, Backtracing) else None,
        )
