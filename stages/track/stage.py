"""The ``track`` node: gives each detection the id of the object it belongs to, per source."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.track.bytetrack import ByteTracker, TrackerParams


class TrackConfig(StageConfig):
    """ByteTrack's thresholds, the lost-track buffer and what happens to untracked boxes."""

    high_score: float = Field(0.5, gt=0, le=1)
    """Detections at or above this score start and first match tracks."""
    low_score: float = Field(0.1, ge=0, le=1)
    """Detections between this and ``high_score`` only keep existing tracks alive (ByteTrack's
    second association: objects half hidden or blurred)."""
    new_track_score: float = Field(0.6, gt=0, le=1)
    """An unmatched detection starts a track only at or above this score."""
    match_iou: float = Field(0.2, gt=0, le=1)
    """Least overlap (IoU times score) for a detection to continue a track."""
    lost_s: float = Field(1.0, ge=0)
    """How long, in stream seconds, a track that lost its object may find it again and keep
    its id."""
    confirm_frames: int = Field(2, ge=1, le=100)
    """Frames in a row a new track must be seen before it gets an id (on a source's first
    frame, tracks are confirmed at once)."""
    class_aware: bool = True
    """Only detections of the track's class continue it (a car never becomes a person)."""
    untracked: Literal["drop", "keep"] = "drop"
    """Detections not on a confirmed track: dropped, or kept with ``track_id = -1``."""

    @model_validator(mode="after")
    def _ordered(self) -> TrackConfig:
        if self.low_score > self.high_score:
            raise ValueError("low_score must not exceed high_score")
        return self


@register("track")
class TrackStage(Stage):
    """Tracks objects across frames (ByteTrack, Kalman motion), one tracker per source."""

    Config = TrackConfig
    config: TrackConfig

    def open(self, context: StageContext) -> None:
        cfg = self.config
        self.params = TrackerParams(
            high_score=cfg.high_score,
            low_score=cfg.low_score,
            new_track_score=cfg.new_track_score,
            match_iou=cfg.match_iou,
            lost_s=cfg.lost_s,
            confirm_frames=cfg.confirm_frames,
            class_aware=cfg.class_aware,
        )
        self.trackers: dict[str, ByteTracker] = {}

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.detections is None:
            raise PipelineError("frame has no detections: link an nms node before this track node")
        tracker = self.trackers.get(frame.source_id)
        if tracker is None:
            tracker = self.trackers[frame.source_id] = ByteTracker(self.params)
        tracked = tracker.update(frame.detections, frame.pts)
        if self.config.untracked == "drop":
            tracked = tracked[tracked.track_id >= 0]  # type: ignore[operator]
        frame.detections = tracked
        return (frame,)

    def stats(self) -> dict[str, Any]:
        trackers = getattr(self, "trackers", {})
        return {"tracks": {source: t.next_id - 1 for source, t in trackers.items()}}
