"""What tracked objects do with one source's lines and zones, frame by frame: crossings,
entries, exits, dwell and crowding, as events; counts and occupancy as a summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.object_results import ObjectResult
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.geometry import Line, Zone, anchor_points, object_sizes
from vapipe.stages.boxes import box_iou

Event = dict[str, Any]


@dataclass
class Crossing:
    """A track on the other side of a line, not yet counted: it must stay there for
    ``min_crossing_frames`` and get deep enough past the line first."""

    position: float
    """Where along the line (0 start, 1 end) its path came over: between the last point
    before and the first point past it, so a diagonal path near an end is placed right."""
    frames: int = 0
    depth: float = 0.0


@dataclass
class TrackMemory:
    """What the analytics remember of one track."""

    class_name: str
    last_seen: float
    sides: dict[str, int] = field(default_factory=dict)
    """Line name -> the side (+1 right, -1 left) the track was last counted or first seen on."""
    crossing: dict[str, Crossing] = field(default_factory=dict)
    """Line name -> a crossing under way."""
    last_point: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Line name -> (signed distance, position along) where the track was last seen off the
    line."""
    birth: Birth | None = None
    """Where it was first seen, if the detector had skipped frames before: until its second
    sighting tells how it moves."""
    attributes: dict[str, ObjectResult] = field(default_factory=dict)
    """Node -> what a model run on the object last said of it (its label, its name), as the
    detection carried it: every event of the track carries it."""


@dataclass
class Birth:
    """A track first seen after frames the detector skipped."""

    box: np.ndarray
    pts: float
    unseen_s: float
    """Since the detector last looked: how long it may have moved unseen."""
    gone: dict[int, np.ndarray]
    """The boxes, when the detector last looked, of the tracks not seen at the birth."""


class SourceAnalytics:
    """The lines, zones and tracks of one source."""

    def __init__(self, config: AnalyticsConfig, lines: list[Line], zones: list[Zone]) -> None:
        self.config = config
        self.lines, self.zones = lines, zones
        self.tracks: dict[int, TrackMemory] = {}
        self._looked: float | None = None  # pts of the last frame the detector ran on
        self._skipped = False  # and whether it skipped frames since
        self._seen: tuple[list[int], np.ndarray] = ([], np.zeros((0, 4)))  # ids, boxes then

    def update(
        self,
        dets: Detections,
        pts: float,
        predicted: bool,
        origins: dict[int, np.ndarray] | None = None,
    ) -> list[Event]:
        """Events caused by this frame's tracked detections, at stream time ``pts``. On a
        ``predicted`` frame (the detector skipped it; the boxes are the tracker's guesses)
        lines wait for the next detection: a guess that overshoots never counts. ``origins``:
        where tracks new on this frame were first seen, less surely (``track.backtrace_s``):
        the side of each line they come from."""
        if dets.track_id is None:
            tracked = dets[np.zeros(len(dets), bool)]
        else:
            tracked = dets[dets.track_id >= 0]
        ids = tracked.track_id.tolist() if tracked.track_id is not None else []
        names = [tracked.class_name(c) for c in tracked.class_id.tolist()]
        unseen_s = self._unseen_s(pts, predicted)
        gone: dict[int, np.ndarray] | None = None  # shared by this frame's births
        held = tracked.attributes
        for position, (track_id, name, box) in enumerate(
            zip(ids, names, tracked.xyxy, strict=True)
        ):
            memory = self.tracks.get(track_id)
            if memory is None:
                memory = self.tracks[track_id] = TrackMemory(name, pts)
                origin = origins.get(track_id) if origins else None
                if origin is not None:
                    self._came_from(memory, origin[None, :])
                elif unseen_s is not None:
                    if gone is None:
                        gone = {t: b for t, b in zip(*self._seen, strict=True) if t not in ids}
                    memory.birth = Birth(box.copy(), pts, unseen_s, gone)
            else:
                memory.last_seen = pts
                if not predicted and memory.birth is not None:
                    self._seen_moving(memory, box, pts)
            if held is not None and held[position]:
                memory.attributes.update(held[position])
        events: list[Event] = []
        if predicted:
            self._skipped = True
        else:
            for line in self.lines:
                events.extend(self._cross(line, tracked, ids, names))
            self._looked, self._skipped = pts, False
            self._seen = (ids, tracked.xyxy)  # a frame's own copy (a masked selection)
        for zone in self.zones:
            events.extend(self._visit(zone, tracked, ids, names, pts))
        events.extend(self._forget(pts))
        for zone in self.zones:
            events.extend(self._crowding(zone))
        for event in events:
            track_id = event.get("track_id")
            memory = self.tracks.get(track_id) if isinstance(track_id, int) else None
            if memory is not None and memory.attributes and "attributes" not in event:
                event["attributes"] = dict(memory.attributes)
        return events

    def summary(self) -> dict[str, Any]:
        """Running counts per line (per direction and class, and per label a model on the
        objects gave) and occupancy per zone."""
        return {
            "lines": {
                line.config.name: {
                    **line.totals(),
                    "by_class": {label: dict(c) for label, c in line.counts.items()},
                    **({"by_attribute": _by_attribute(line)} if line.by_attribute else {}),
                }
                for line in self.lines
            },
            "zones": {
                zone.config.name: {
                    "occupancy": len(zone.members),
                    "track_ids": sorted(zone.members),
                }
                for zone in self.zones
            },
        }

    def _cross(self, line: Line, dets: Detections, ids: list[int], names: list[str]) -> list[Event]:
        events = []
        signed, along = line.sides(anchor_points(dets.xyxy, line.anchor))
        sizes = object_sizes(dets.xyxy).tolist()
        key = line.config.name
        for track_id, name, distance, position, size in zip(
            ids, names, signed.tolist(), along.tolist(), sizes, strict=True
        ):
            if line.config.classes is not None and name not in line.config.classes:
                continue
            memory = self.tracks[track_id]
            if self._crossed(memory, key, distance, position, size):
                label = line.config.in_label if distance > 0 else line.config.out_label
                line.counts[label][name] += 1
                for node, value in memory.attributes.items():
                    tag = value.tag
                    if tag is not None:
                        counts = line.by_attribute.setdefault(node, {}).setdefault(tag, Counter())
                        counts[label] += 1
                events.append(
                    {
                        "event": "line_cross",
                        "track_id": track_id,
                        "class_name": name,
                        "line": key,
                        "direction": label,
                        "counts": line.totals(),
                    }
                )
        return events

    def _crossed(
        self, memory: TrackMemory, key: str, distance: float, position: float, size: float
    ) -> bool:
        """Whether this sighting completes a crossing of line ``key``: the track left the side
        it was on and has now been on the other one for ``min_crossing_frames`` sightings and
        deep enough (``min_crossing_depth`` of its box's height, at least
        ``min_crossing_px``).
        Going back before that cancels it, so an object walking along the line or jittering
        across it counts nothing; a real return later counts. It counts where the path
        crossed the segment, not where the first point past the line lies."""
        cfg = self.config
        if abs(distance) < max(cfg.hysteresis_px, cfg.hysteresis_depth * size):
            return False  # on the line: neither side
        side = 1 if distance > 0 else -1
        before = memory.sides.get(key)
        if before is None or before == side:
            memory.sides[key] = side
            memory.crossing.pop(key, None)
            memory.last_point[key] = (distance, position)
            return False
        if key not in memory.crossing:  # the first sighting past it: the last one was before it
            where = _where_crossed(memory.last_point[key], distance, position)
            memory.crossing[key] = Crossing(position=where)
        memory.last_point[key] = (distance, position)
        crossing = memory.crossing[key]
        crossing.frames += 1
        crossing.depth = max(crossing.depth, abs(distance))
        needed = max(cfg.min_crossing_px, cfg.min_crossing_depth * size)
        if crossing.frames < cfg.min_crossing_frames or crossing.depth < needed:
            return False
        memory.sides[key] = side
        del memory.crossing[key]
        return 0.0 <= crossing.position <= 1.0  # beyond the line's ends: a side change only

    def _unseen_s(self, pts: float, predicted: bool) -> float | None:
        """How long the detector had not looked when it looks again at ``pts``: what a track
        born now may have moved unseen. None where no run-back applies: a guessed frame,
        every-frame detection, the rule off, or more than ``lost_s`` (a motion node's long
        stillness, an outage: over minutes, any object's run-back lands across every line)."""
        if predicted or not self._skipped or self._looked is None:
            return None
        unseen_s = pts - self._looked
        if not self.config.unseen_crossings or unseen_s > self.config.lost_s:
            return None
        return unseen_s

    def _seen_moving(self, memory: TrackMemory, box: np.ndarray, pts: float) -> None:
        """A track born after skipped frames, seen again: the side of each line it was on when
        the detector last looked before its birth (its motion run back over the unseen time),
        or that of the track it took over, becomes the side it comes from."""
        birth, memory.birth = memory.birth, None
        if birth is None or pts <= birth.pts:
            return
        back = (box - birth.box) * (birth.unseen_s / (pts - birth.pts))
        before = (birth.box - back)[None, :]
        earlier = None
        if birth.gone:
            ids, boxes = zip(*birth.gone.items(), strict=True)
            overlaps = box_iou(before[0], np.array(boxes))
            if overlaps.max() >= HANDOVER_IOU:
                earlier = self.tracks.get(ids[int(overlaps.argmax())])
        self._came_from(memory, before, earlier)

    def _came_from(
        self, memory: TrackMemory, box: np.ndarray, earlier: TrackMemory | None = None
    ) -> None:
        """The side of each line that ``box`` (one row) is on, clear of the line, becomes the
        side the track comes from; or, for a track that took over ``earlier``'s object, the
        side that one was last counted on."""
        for line in self.lines:  # none is mid-crossing: lines count on detected frames only
            key = line.config.name
            if earlier is not None and key in earlier.sides:  # the same object: counted once
                memory.sides[key] = earlier.sides[key]
                memory.last_point[key] = earlier.last_point[key]
                continue
            signed, along = line.sides(anchor_points(box, line.anchor))
            distance, size = signed.item(), object_sizes(box).item()  # one box: one value
            if abs(distance) >= max(self.config.hysteresis_px, self.config.hysteresis_depth * size):
                memory.sides[key] = 1 if distance > 0 else -1
                memory.last_point[key] = (distance, along.item())

    def _visit(
        self, zone: Zone, dets: Detections, ids: list[int], names: list[str], pts: float
    ) -> list[Event]:
        events = []
        inside, distance = zone.places(anchor_points(dets.xyxy, zone.anchor))
        band = np.maximum(
            self.config.hysteresis_px, self.config.hysteresis_depth * object_sizes(dets.xyxy)
        )
        clear = (distance >= band).tolist()
        key = zone.config.name
        for track_id, name, is_in, is_clear in zip(ids, names, inside.tolist(), clear, strict=True):
            if zone.config.classes is not None and name not in zone.config.classes:
                continue
            member = track_id in zone.members
            if is_in and is_clear and not member:
                zone.members[track_id] = pts
                events.append(_zone_event("zone_enter", track_id, name, key))
            elif not is_in and is_clear and member:
                events.append(self._exit(zone, track_id, name, pts, "left"))
            elif member and zone.config.dwell_s is not None and track_id not in zone.dwelt:
                stayed = pts - zone.members[track_id]
                if stayed >= zone.config.dwell_s - 1e-6:  # pts sums carry rounding error
                    zone.dwelt.add(track_id)
                    events.append(
                        {
                            **_zone_event("zone_dwell", track_id, name, key),
                            "dwell_s": round(stayed, 3),
                        }
                    )
        return events

    def _exit(self, zone: Zone, track_id: int, name: str, pts: float, reason: str) -> Event:
        entered = zone.members.pop(track_id)
        zone.dwelt.discard(track_id)
        return {
            **_zone_event("zone_exit", track_id, name, zone.config.name),
            "dwell_s": round(pts - entered, 3),
            "reason": reason,
        }

    def _forget(self, pts: float) -> list[Event]:
        """Tracks unseen for ``lost_s`` have gone: they leave their zones."""
        gone = [t for t, m in self.tracks.items() if pts - m.last_seen > self.config.lost_s]
        events = []
        for track_id in gone:
            memory = self.tracks.pop(track_id)
            for zone in self.zones:
                if track_id in zone.members:
                    event = self._exit(zone, track_id, memory.class_name, pts, "lost")
                    if memory.attributes:
                        event["attributes"] = dict(memory.attributes)
                    events.append(event)
        return events

    def _crowding(self, zone: Zone) -> list[Event]:
        limit = zone.config.max_objects
        if limit is None:
            return []
        crowded = len(zone.members) > limit
        if crowded == zone.crowded:
            return []
        zone.crowded = crowded
        return [
            {
                "event": "zone_crowded" if crowded else "zone_clear",
                "track_id": None,
                "class_name": None,
                "zone": zone.config.name,
                "occupancy": len(zone.members),
                "max_objects": limit,
                "track_ids": sorted(zone.members),
            }
        ]


HANDOVER_IOU = 0.3
"""A lost track whose last box overlaps a new track's run-back box this much was the same
object."""


def _where_crossed(last: tuple[float, float], distance: float, position: float) -> float:
    """Where along the line the straight path from ``last`` (signed distance, position along),
    the last point off the line on the side left, to this one crosses it."""
    before, at = last
    return at + (position - at) * before / (before - distance)


def _by_attribute(line: Line) -> dict[str, dict[str, dict[str, int]]]:
    return {
        node: {tag: dict(counts) for tag, counts in tags.items()}
        for node, tags in line.by_attribute.items()
    }


def _zone_event(kind: str, track_id: int, class_name: str, zone: str) -> Event:
    return {"event": kind, "track_id": track_id, "class_name": class_name, "zone": zone}
