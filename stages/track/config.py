"""The ``track`` node's keys: ByteTrack's thresholds, the lost-track buffer, untracked boxes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vapipe.pipeline.stage import StageConfig


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
    low_match_iou: float = Field(0.5, gt=0, le=1)
    """Least overlap for a low-score detection to continue a track (the second association)."""
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
