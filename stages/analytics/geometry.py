"""Lines and zones in a source's pixels, and the anchor point of each box."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import shapely

from vapipe.stages.analytics.config import AnalyticsConfig, Anchor, LineConfig, ZoneConfig

MIN_LINE_PX = 8.0
"""Shorter, in the picture, and no object can be seen on both sides of it."""
MIN_ZONE_PX2 = 64.0

# Fraction of the box's width and height from its top-left corner.
ANCHORS: dict[str, tuple[float, float]] = {
    "bottom_center": (0.5, 1.0),
    "center": (0.5, 0.5),
    "top_center": (0.5, 0.0),
    "bottom_left": (0.0, 1.0),
    "bottom_right": (1.0, 1.0),
    "top_left": (0.0, 0.0),
    "top_right": (1.0, 0.0),
    "center_left": (0.0, 0.5),
    "center_right": (1.0, 0.5),
}


def anchor_points(xyxy: np.ndarray, anchor: Anchor) -> np.ndarray:
    """One point per box (N x 2)."""
    fx, fy = ANCHORS[anchor]
    x = xyxy[:, 0] + fx * (xyxy[:, 2] - xyxy[:, 0])
    y = xyxy[:, 1] + fy * (xyxy[:, 3] - xyxy[:, 1])
    return np.stack((x, y), axis=1)


@dataclass
class Line:
    """A counting line in pixels, with its running counts per direction and class."""

    config: LineConfig
    start: np.ndarray
    end: np.ndarray
    anchor: Anchor
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    by_attribute: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    """Node -> label (or name) a model on the objects gave -> direction -> crossings."""

    def __post_init__(self) -> None:
        self.counts = {self.config.in_label: Counter(), self.config.out_label: Counter()}

    def sides(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Signed distance of each point from the line (positive: right of start->end on
        screen) and where it projects along the segment (0 at start, 1 at end)."""
        direction = self.end - self.start
        length = float(np.hypot(*direction))
        offset = points - self.start
        signed = (direction[0] * offset[:, 1] - direction[1] * offset[:, 0]) / length
        along = (offset @ direction) / (length * length)
        return signed, along

    def totals(self) -> dict[str, int]:
        return {label: sum(counter.values()) for label, counter in self.counts.items()}


@dataclass
class Zone:
    """A zone in pixels, with the tracks inside it and whether it is crowded."""

    config: ZoneConfig
    polygon: shapely.Polygon
    anchor: Anchor
    members: dict[int, float] = field(default_factory=dict)
    """track_id -> pts at which it entered."""
    dwelt: set[int] = field(default_factory=set)
    crowded: bool = False

    def __post_init__(self) -> None:
        shapely.prepare(self.polygon)

    def places(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each point is inside, and its distance to the zone's edge."""
        inside = shapely.contains_xy(self.polygon, points[:, 0], points[:, 1])
        distance = shapely.distance(self.polygon.boundary, shapely.points(points))
        return inside, distance


def compile_geometry(
    config: AnalyticsConfig, source_id: str, width: int, height: int
) -> tuple[list[Line], list[Zone]]:
    """The lines and zones that apply to ``source_id``, scaled to its frame size."""
    frame = np.array([width, height], np.float64)

    def scale(item: LineConfig | ZoneConfig) -> np.ndarray:
        return frame if config.is_normalized(item) else np.ones(2)

    lines = [
        Line(
            item,
            np.asarray(item.start, np.float64) * scale(item),
            np.asarray(item.end, np.float64) * scale(item),
            item.anchor or config.anchor,
        )
        for item in config.lines
        if item.source in (None, source_id)
    ]
    zones = [
        Zone(
            item,
            shapely.Polygon(np.asarray(item.polygon, np.float64) * scale(item)),
            item.anchor or config.anchor,
        )
        for item in config.zones
        if item.source in (None, source_id)
    ]
    return lines, zones


def geometry_problems(
    lines: list[Line], zones: list[Zone], source_id: str, width: int, height: int
) -> list[str]:
    """Lines and zones that cannot count anything on this source's frames: outside the
    picture, or too small to cross or enter (a 0-1 coordinate given as pixels, typically)."""
    picture = shapely.box(0, 0, width, height)
    where = f"on source '{source_id}' ({width}x{height})"
    hint = "; coordinates in 0-1 need normalized = true"
    problems = []
    for line in lines:
        segment = shapely.LineString([line.start, line.end])
        visible = segment.intersection(picture).length
        name = f"line '{line.config.name}'"
        if segment.length < MIN_LINE_PX:
            problems.append(f"{name} is {segment.length:.1f} px long {where}{hint}")
        elif visible < MIN_LINE_PX:
            problems.append(
                f"{name} ({_point(line.start)} to {_point(line.end)}) lies outside the "
                f"picture {where}: nothing can cross it"
            )
    for zone in zones:
        name = f"zone '{zone.config.name}'"
        visible = zone.polygon.intersection(picture).area
        if zone.polygon.area < MIN_ZONE_PX2:
            problems.append(f"{name} is {zone.polygon.area:.1f} px² {where}{hint}")
        elif visible < MIN_ZONE_PX2:
            problems.append(f"{name} lies outside the picture {where}: nothing can enter it")
    return problems


def _point(point: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:g}" for value in point.tolist()) + "]"


def object_sizes(xyxy: np.ndarray) -> np.ndarray:
    """Each box's height: the yardstick of an object's size for the crossing depth and the
    jitter band, at a line or a zone's edge. A walker's sway and a box's jitter scale with it
    (a box's width changes with the pose, and for a walker it is a third of the height, so a
    fraction of it let a 720p walker's sway count at every step); it is also the one the
    tuning clips of the accuracy benchmark chose (bench/results/accuracy.md)."""
    return xyxy[:, 3] - xyxy[:, 1]
