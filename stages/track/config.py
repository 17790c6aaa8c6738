"""The ``track`` node's keys: ByteTrack's thresholds, the lost-track buffer, untracked boxes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.choice import AutoConfig
from vapipe.stages.infer.backends.config import BackendConfig, backend_shorthand

CONFUSABLE: list[list[str]] = [
    ["car", "truck", "bus"],
    ["bicycle", "motorcycle"],
    ["cat", "dog"],
    ["horse", "cow", "sheep"],
]
"""The default class groups (COCO names): vehicles; two-wheelers; small animals; large animals
(the sample models call the horses of horses.mp4 cows and sheep at times)."""


class AppearanceConfig(StageConfig):
    """The ``[nodes.track.appearance]`` table: an embedding model (a re-identification
    network) run on the confident detections of ``classes`` every detected frame, and each
    track's look (its vectors' running mean) weighed with motion, as BoT-SORT does: a pair
    that overlaps at least ``proximity`` and looks alike (``match``) ranks as their likeness;
    a pair that looks unlike (under ``reject``) is not one object, whatever its overlap.
    Detections of other classes, and tracks without a look yet, are matched by motion alone."""

    model: str = "person-reid"
    """A manifest name or a path to an ONNX file whose one output is a vector per crop."""

    def models(self) -> dict[str, str]:
        return {"model": self.model}

    classes: list[str] = Field(default_factory=lambda: ["person"])
    """Class names whose detections are embedded (what the model was trained on)."""
    proximity: float = Field(0.5, ge=0, le=1)
    """Least overlap (IoU) for looks to raise a pair's rank (BoT-SORT's ``proximity_thresh``):
    looks decide between near candidates, never across the picture."""
    match: float = Field(0.5, ge=-1, le=1)
    """Cosine similarity from which a near pair ranks as ``(1 + similarity) / 2`` where that
    is more than its overlap (BoT-SORT's ``appearance_thresh`` 0.25 is similarity 0.5)."""
    reject: float = Field(0.5, ge=-1, le=1)
    """Under this cosine similarity, a detection never continues a track, whatever the
    overlap: another person walked in where one walked out. -1 turns the gate off."""
    smoothing: float = Field(0.9, ge=0, lt=1)
    """A track's look is ``smoothing * look + (1 - smoothing) * new vector``, renormalised
    (BoT-SORT's feature EMA); 0 keeps only the latest."""
    min_size: int = Field(16, ge=1)
    """Boxes whose shorter side is below this many pixels are not embedded."""
    fit: Literal["letterbox", "square", "stretch"] = "stretch"
    """How a box meets the model's input (re-id models are trained on stretched boxes)."""
    max_batch: int = Field(16, ge=1, le=256)
    """Crops per model call."""
    crops: Literal["auto", "numpy", "opencl"] = "auto"
    """Where the crops are cut, resized and normalised, as an object node's ``crops``:
    ``auto`` (one OpenCL kernel for a frame's crops on a GPU whose kernel builds, else
    numpy), ``numpy``, or ``opencl`` (any OpenCL device; numpy with a warning where none
    works)."""
    backend: BackendConfig = Field(default_factory=AutoConfig)
    """As the infer node's ``backend`` (onnxruntime providers, torch device)."""

    @model_validator(mode="before")
    @classmethod
    def _backend_shorthand(cls, data: Any) -> Any:
        return backend_shorthand(data)


class TrackConfig(StageConfig):
    """ByteTrack's thresholds, the lost-track buffer and what happens to untracked boxes.

    The defaults minimise the count error of bench/accuracy_bench.py (hand-labelled traffic and
    generated scenes, two models): feed the tracker boxes from a low score (``nms.conf = 0.2``)
    and let these thresholds decide what is an object."""

    high_score: float = Field(0.3, gt=0, le=1)
    """Detections at or above this score start and first match tracks."""
    low_score: float = Field(0.1, ge=0, le=1)
    """Detections between this and ``high_score`` only keep existing tracks alive (ByteTrack's
    second association: objects half hidden or blurred)."""
    new_track_score: float = Field(0.3, gt=0, le=1)
    """An unmatched detection starts a track only at or above this score."""
    match_iou: float = Field(0.2, gt=0, le=1)
    """Least overlap (IoU) for a detection to continue a track; among those that qualify,
    overlap times score decides (ByteTrack's score fusion)."""
    low_match_iou: float = Field(0.5, gt=0, le=1)
    """Least overlap for a low-score detection to continue a track (the second association)."""
    gap_buffer: float = Field(0.2, ge=0, le=1)
    """On the first detected frame after the detector skipped some (``infer.interval``, a
    motion node), what plain overlap left unmatched is matched again with every box widened
    by this fraction of its size on each side per skipped frame, at most 1 (buffered IoU, as
    C-BIoU's cascade): an object that moved more than its own width between two detections
    still meets its track. With a detection on every frame it changes nothing. 0.2: the best
    of 0-0.3 on the accuracy benchmark's tuning clips detected once per 0.13, 0.2 and 0.27 s
    (count error summed over those rates 147 -> 99; the traffic clip's westbound lane at
    0.27 s: 9 of 9 cars instead of 0); on the held-out clips 59 -> 61. 0 turns it off."""
    lost_s: float = Field(1.0, ge=0)
    """How long, in stream seconds, a track that lost its object may find it again and keep
    its id."""
    border_lost_s: float = Field(0.3, ge=0)
    """How long a lost track that left the picture (its last box touched the edge, or its
    predicted centre is past it) keeps its id: an object that left is gone, and what walks in
    where it left is another one. At most ``lost_s``. Meanwhile only a detection further along
    its own direction of travel continues it (one coming back in is a new object)."""
    max_aspect_change: float = Field(2.0, ge=1)
    """A detection whose width/height differs from that of the track's last seen box by more
    than this factor (either way) is another object: a dog walking in where a person walked out does
    not take the person's id. A large value turns the gate off."""
    class_half_life_s: float = Field(2.0, gt=0)
    """A track's class is the score-weighted vote of its detections, each vote halving in
    weight every this many seconds of stream time: the class follows what the detector saw
    lately, so an event carries the class seen when it happened, not over the whole life."""
    confirm_frames: int = Field(2, ge=1, le=100)
    """Frames a new track must be seen in before it gets an id, unless one of its detections
    scores ``confirm_score`` (on a source's first frame, tracks are confirmed at once). Only
    a confirmed track's detections carry its id, so an unconfirmed one (a fragment, a
    flicker) makes no crossing or zone event."""
    confirm_score: float = Field(0.35, gt=0, le=1)
    """A detection scoring at least this confirms its new track at once (0.35: the best of
    0.3-0.5 on the accuracy benchmark's tuning clips; a fragment inside a tracked object
    starts no track whatever it scores)."""
    fragment_overlap: float = Field(0.8, gt=0, le=1)
    """A detection no track took that lies this much (of its own area) inside the box of one
    a track did take, of the same or a confusable class, is part of that object (a sleeve, a
    head, a wheel) and starts no track. 1 turns this off."""
    group_overlap: float = Field(0.5, gt=0, le=1)
    """A detection no track took that holds two or more boxes tracks did take, each at least
    this much (of their own area) inside it, of its kind, is those objects seen as one (two
    walkers side by side in one box) and starts no track. 1 turns this off."""
    confusable: list[list[str]] = Field(default_factory=lambda: [list(g) for g in CONFUSABLE])
    """Groups of class names a detector mixes up: vehicles (car, truck, bus), two-wheelers
    (bicycle, motorcycle), small animals (cat, dog), large animals (horse, cow, sheep). A class
    in no group (person) is a group of its own. With ``class_aware``, a track is continued only
    by detections of its group; a fragment of one class of a group is a fragment of any."""
    class_aware: bool = True
    """Only detections of the track's group (``confusable``) continue it: a dog walking in
    where a person was is a new track, never the person's, and a box is labelled with a class
    of its own group (its vote: car 0.7, truck 0.4, car 0.8... stays one car). ``false``: any
    class continues any track (the vote then decides the label); strict classes:
    ``confusable = []``."""
    class_change_score: float = Field(0.5, gt=0, le=1)
    """With ``class_aware``: a detection of another group scoring this or more is another
    object (a new track). A less sure one lying on the box of a track seen the frame before
    (IoU 0.5) is the detector hesitating (a dog called a person 0.4 for a frame): it continues
    that track without voting for its class, and starts none."""
    merge_iou: float = Field(0.8, gt=0, le=1)
    """Two detections of different classes overlapping this much are one object named twice
    (class-aware NMS keeps both): the weaker one is merged into the other's track, adding its
    score to the class vote. 1 turns merging off."""
    backtrace_s: float = Field(1.0, ge=0)
    """When a track gets its id, its path is traced back this far (stream seconds) through the
    boxes no identified track held (scores under ``new_track_score``, a tentative track's), and
    the analytics take the earliest as where it came from: a car the detector was unsure of
    until it was past a line still counts there. 0 turns it off."""
    appearance: AppearanceConfig | None = None
    """Looks as well as motion (``[nodes.track.appearance]``, a re-id model); default: motion
    and overlap only."""
    untracked: Literal["drop", "keep"] = "drop"
    """Detections not on a confirmed track: dropped, or kept with ``track_id = -1``."""

    @model_validator(mode="after")
    def _ordered(self) -> TrackConfig:
        if self.low_score > self.high_score:
            raise ValueError("low_score must not exceed high_score")
        return self
