"""Trackers and counters over cached detections: vapipe's own track and analytics stages (the
code the pipeline runs), and Ultralytics' ByteTrack with its ObjectCounter's line rule."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import numpy as np
import shapely

from bench.accuracy.clips import Clip
from bench.accuracy.score import Box
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, Motion, StreamInfo
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.geometry import compile_geometry
from vapipe.stages.analytics.stage import AnalyticsStage
from vapipe.stages.infer.interval import DetectionSchedule
from vapipe.stages.infer.names import COCO_NAMES
from vapipe.stages.motion.stage import MotionConfig, MotionStage
from vapipe.stages.track.stage import TrackStage

BEFORE = {
    "track": {"high_score": 0.5, "new_track_score": 0.6, "confirm_frames": 2, "lost_s": 1.0,
              "class_aware": True, "merge_iou": 1.0, "backtrace_s": 0.0},
    "analytics": {"min_crossing_frames": 1, "min_crossing_px": 0, "min_crossing_depth": 0},
    "conf": 0.3,
}  # fmt: skip
"""vapipe before this benchmark: its tracker defaults and the plain side-change line rule."""


@functools.cache
def still_frames(path: Path, fps: float) -> tuple[bool, ...]:
    """The frames of a clip that the motion node (its defaults) lets the detector skip,
    from the clip's own pictures."""
    gate = MotionStage("motion", MotionConfig())
    gate.open(None)  # type: ignore[arg-type]
    flags = []
    with av.open(str(path)) as container:
        for seq, picture in enumerate(container.decode(video=0)):
            image = picture.to_ndarray(format="bgr24")
            info = StreamInfo("clip", str(path), image.shape[1], image.shape[0], fps)
            (frame,) = gate.process(Frame("clip", seq, seq / fps, 0.0, image, info))
            flags.append(frame.predicted)
    return tuple(flags)


def pictures(clip: Clip, wanted: bool) -> Iterator[np.ndarray]:
    """The clip's frames (BGR) where ``wanted`` (a tracker that reads pixels), else one
    black picture over and over."""
    if wanted:
        with av.open(str(clip.path)) as container:
            for picture in container.decode(video=0):
                yield picture.to_ndarray(format="bgr24")
        return
    width, height = clip.size
    black = np.zeros((height, width, 3), np.uint8)
    while True:
        yield black


_LOOKS: dict[tuple, tuple[np.ndarray, float]] = {}


class _Remembered:
    """``Embedder.vectors`` remembered by clip, frame and boxes, so that the settings compared
    on one clip's detections embed each box once; ``saved`` is the time a lookup saved (the
    embedding's own time when it was made), added back to the stage's time per frame."""

    def __init__(self, vectors: Callable[[Frame], np.ndarray], clip: str) -> None:
        self.vectors, self.clip, self.saved = vectors, clip, 0.0

    def __call__(self, frame: Frame) -> np.ndarray:
        dets = frame.detections
        assert dets is not None
        key = (self.clip, frame.seq, dets.xyxy.tobytes(), dets.score.tobytes())
        if key not in _LOOKS:
            started = time.perf_counter()
            _LOOKS[key] = (self.vectors(frame), time.perf_counter() - started)
        else:
            self.saved += _LOOKS[key][1]
        return _LOOKS[key][0]


def _tracked(
    clip: Clip,
    dets: list[Detections],
    track: dict,
    conf: float,
    stage: type[TrackStage],
    interval: int = 1,
    motion: bool = False,
    interval_s: float | None = None,
    seconds: list[float] | None = None,
) -> Iterator[Frame]:
    """Each frame after the track stage (the detections kept at ``conf`` and up). With
    ``interval`` N, the detector's boxes reach the tracker on one frame in N only, as with
    ``infer.interval`` (``interval_s``: as with that key, by the node's own schedule): the
    others are predicted frames. With ``motion``, so do the frames where the motion node saw
    nothing move (flagged still, as it flags them). A tracker that reads pixels (``track.
    appearance``) gets the clip's own; ``seconds`` gets the stage's time per frame."""
    schedule = DetectionSchedule(interval, interval_s)
    tracker = stage("track", stage.Config.model_validate(track))
    tracker.open(None)  # type: ignore[arg-type]
    width, height = clip.size
    info = StreamInfo(clip.name, str(clip.path), width, height, clip.fps)
    still = still_frames(clip.path, clip.fps) if motion else ()
    images = pictures(clip, tracker.reads_pixels)
    remembered = None
    if tracker.embedder is not None:
        remembered = _Remembered(tracker.embedder.vectors, clip.name)
        tracker.embedder.vectors = remembered  # type: ignore[method-assign]
    for seq, found in enumerate(dets):
        frame = Frame(clip.name, seq, seq / clip.fps, 0.0, next(images), info)
        if seq < len(still) and still[seq]:
            frame.predicted = True
            frame.motion = Motion(still=True)
        elif not schedule.due(frame):
            frame.predicted = True
        else:
            frame.detections = found[found.score >= conf]
        started = time.perf_counter()
        (frame,) = tracker.process(frame)
        if seconds is not None:
            saved = remembered.saved if remembered else 0.0
            seconds.append(time.perf_counter() - started + saved)
            if remembered:
                remembered.saved = 0.0
        yield frame
    tracker.close()


def _boxes(found: Detections) -> list[Box]:
    return [(int(t), *map(float, b)) for t, b in zip(found.track_id, found.xyxy, strict=True)]


def vapipe(
    clip: Clip,
    dets: list[Detections],
    track: dict,
    analytics: dict,
    conf: float,
    stage: type[TrackStage] = TrackStage,
    interval: int = 1,
    motion: bool = False,
    interval_s: float | None = None,
    seconds: list[float] | None = None,
) -> tuple[list[dict], list[list[Box]]]:
    """Events and per-frame tracks of the pipeline's own track and analytics stages (or of
    another track stage: a plugin's subclass of TrackStage, with its own config keys; one
    that reads pixels gets the clip's). ``seconds``: the track stage's time per frame."""
    counter = AnalyticsStage(
        "analytics", AnalyticsConfig.model_validate({**clip.analytics, **analytics})
    )
    counter.open(None)  # type: ignore[arg-type]
    events: list[dict] = []
    tracks: list[list[Box]] = []
    frames = _tracked(clip, dets, track, conf, stage, interval, motion, interval_s, seconds)
    for frame in frames:
        (frame,) = counter.process(frame)
        events.extend({**e, "seq": frame.seq} for e in frame.events)
        tracks.append(_boxes(frame.detections))
    return events, tracks


def linezone(
    clip: Clip, dets: list[Detections], track: dict, conf: float
) -> tuple[list[dict], list[list[Box]]] | None:
    """supervision's ``LineZone`` (its defaults: all four corners of a box past the line, one
    frame) counting vapipe's tracks: the same tracks as vapipe's own rule, another line rule.
    None when supervision is not installed."""
    try:
        import supervision as sv
    except ImportError:
        return None
    settings = AnalyticsConfig.model_validate(clip.analytics)
    (line, *_), _ = compile_geometry(settings, clip.name, *clip.size)
    zone = sv.LineZone(sv.Point(*line.start), sv.Point(*line.end))
    events: list[dict] = []
    tracks: list[list[Box]] = []
    for frame in _tracked(clip, dets, track, conf, TrackStage):
        found = frame.detections[frame.detections.tracked()]
        if len(found):
            boxes = sv.Detections(found.xyxy.astype(np.float32), confidence=found.score,
                                  class_id=found.class_id, tracker_id=found.track_id)  # fmt: skip
            crossed_in, crossed_out = zone.trigger(boxes)
            for k in np.flatnonzero(crossed_in | crossed_out):
                x1, y1, x2, y2 = found.xyxy[k]
                events.append(_crossing(line, frame.seq, int(found.track_id[k]),
                                        ((x1 + x2) / 2, (y1 + y2) / 2),
                                        found.class_name(int(found.class_id[k]))))  # fmt: skip
        tracks.append(_boxes(found))
    return events, tracks


def _crossing(line: Any, seq: int, track: int, centre: tuple, name: str) -> dict:
    """A crossing event named, by vapipe's rule, after the side the centre is now on."""
    (side,), _ = line.sides(np.array([centre], np.float64))
    direction = line.config.in_label if side > 0 else line.config.out_label
    return {"event": "line_cross", "seq": seq, "track_id": track, "direction": direction,
            "class_name": name}  # fmt: skip


class _Boxes:
    """What Ultralytics' tracker reads of a detector's results: conf, cls, xywh, xyxy."""

    def __init__(self, xyxy: np.ndarray, conf: np.ndarray, cls: np.ndarray) -> None:
        self.xyxy, self.conf, self.cls = xyxy, conf, cls
        self.xywh = np.concatenate(((xyxy[:, :2] + xyxy[:, 2:]) / 2, xyxy[:, 2:] - xyxy[:, :2]), 1)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: Any) -> _Boxes:
        return _Boxes(self.xyxy[index], self.conf[index], self.cls[index])


def ultralytics(
    clip: Clip, dets: list[Detections], conf: float, labels: list[dict[int, str]] | None = None
) -> tuple[list[dict], list[list[Box]]] | None:
    """Ultralytics' ByteTrack (its bytetrack.yaml defaults) and ObjectCounter's rule: a track
    counts once, when the segment between its last two box centres meets the line. None when
    ultralytics is not installed. ``labels`` gets each frame's class name per track."""
    try:
        import yaml
        from ultralytics.trackers.byte_tracker import BYTETracker
        from ultralytics.utils import ROOT
    except ImportError:
        return None
    settings = yaml.safe_load((ROOT / "cfg" / "trackers" / "bytetrack.yaml").read_text())
    tracker = BYTETracker(SimpleNamespace(**settings))
    settings = AnalyticsConfig.model_validate(clip.analytics)
    (line, *_), _ = compile_geometry(settings, clip.name, *clip.size)
    segment = shapely.LineString([line.start, line.end])
    last: dict[int, np.ndarray] = {}
    counted: set[int] = set()
    events: list[dict] = []
    tracks: list[list[Box]] = []
    for seq, found in enumerate(dets):
        keep = found.score >= conf
        boxes = _Boxes(found.xyxy[keep].astype(np.float32), found.score[keep],
                       found.class_id[keep].astype(np.float32))  # fmt: skip
        rows = tracker.update(boxes) if len(boxes) else np.zeros((0, 8))
        frame: list[Box] = []
        named: dict[int, str] = {}
        for x1, y1, x2, y2, track, _, cls, *_ in rows.tolist():
            frame.append((int(track), x1, y1, x2, y2))
            named[int(track)] = COCO_NAMES[int(cls)]
            centre = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
            before = last.get(int(track))
            last[int(track)] = centre
            if before is None or int(track) in counted:
                continue
            if not segment.intersects(shapely.LineString([before, centre])):  # as ObjectCounter
                continue
            counted.add(int(track))
            # ObjectCounter names directions by motion (IN: rightward or downward); the side
            # the centre moved to gives the same split, in the config's labels, by vapipe's rule.
            events.append(_crossing(line, seq, int(track), tuple(centre), COCO_NAMES[int(cls)]))
        tracks.append(frame)
        if labels is not None:
            labels.append(named)
    return events, tracks
