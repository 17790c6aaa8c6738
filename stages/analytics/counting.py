"""What tracked objects do with one source's lines and zones, frame by frame: crossings,
entries, exits, dwell and crowding, as events; counts and occupancy as a summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.geometry import Line, Zone, anchor_points
from vapipe.stages.detections import Detections

Event = dict[str, Any]


@dataclass
class TrackMemory:
    """What the analytics remember of one track."""

    class_name: str
    last_seen: float
    sides: dict[str, int] = field(default_factory=dict)
    """Line name -> the last side (+1 right, -1 left) the anchor was clearly on."""


class SourceAnalytics:
    """The lines, zones and tracks of one source."""

    def __init__(self, config: AnalyticsConfig, lines: list[Line], zones: list[Zone]) -> None:
        self.config = config
        self.lines, self.zones = lines, zones
        self.tracks: dict[int, TrackMemory] = {}

    def update(self, dets: Detections, pts: float) -> list[Event]:
        """Events caused by this frame's tracked detections, at stream time ``pts``."""
        if dets.track_id is None:
            tracked = dets[np.zeros(len(dets), bool)]
        else:
            tracked = dets[dets.track_id >= 0]
        ids = tracked.track_id.tolist() if tracked.track_id is not None else []
        names = [tracked.class_name(c) for c in tracked.class_id.tolist()]
        for track_id, name in zip(ids, names, strict=True):
            memory = self.tracks.get(track_id)
            if memory is None:
                self.tracks[track_id] = TrackMemory(name, pts)
            else:
                memory.last_seen = pts
        events: list[Event] = []
        for line in self.lines:
            events.extend(self._cross(line, tracked, ids, names))
        for zone in self.zones:
            events.extend(self._visit(zone, tracked, ids, names, pts))
        events.extend(self._forget(pts))
        for zone in self.zones:
            events.extend(self._crowding(zone))
        return events

    def summary(self) -> dict[str, Any]:
        """Running counts per line (per direction and class) and occupancy per zone."""
        return {
            "lines": {
                line.config.name: {
                    **line.totals(),
                    "by_class": {label: dict(c) for label, c in line.counts.items()},
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
        key, hysteresis = line.config.name, self.config.hysteresis_px
        for track_id, name, distance, position in zip(
            ids, names, signed.tolist(), along.tolist(), strict=True
        ):
            if line.config.classes is not None and name not in line.config.classes:
                continue
            if abs(distance) < hysteresis:
                continue  # on the line: keep the last clear side (no count for jitter)
            side = 1 if distance > 0 else -1
            memory = self.tracks[track_id]
            before = memory.sides.get(key)
            memory.sides[key] = side
            if before is None or before == side or not 0.0 <= position <= 1.0:
                continue  # first sighting, same side, or passing beyond the line's ends
            label = line.config.in_label if side > 0 else line.config.out_label
            line.counts[label][name] += 1
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

    def _visit(
        self, zone: Zone, dets: Detections, ids: list[int], names: list[str], pts: float
    ) -> list[Event]:
        events = []
        inside, distance = zone.places(anchor_points(dets.xyxy, zone.anchor))
        clear = (distance >= self.config.hysteresis_px).tolist()
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
                    events.append(self._exit(zone, track_id, memory.class_name, pts, "lost"))
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


def _zone_event(kind: str, track_id: int, class_name: str, zone: str) -> Event:
    return {"event": kind, "track_id": track_id, "class_name": class_name, "zone": zone}
