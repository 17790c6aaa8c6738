"""Lines and zones in a source's pixels, and the anchor point of each box."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import shapely

from vapipe.stages.analytics.config import AnalyticsConfig, Anchor, LineConfig, ZoneConfig

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
    scale = np.array([width, height], np.float64) if config.normalized else np.ones(2)
    lines = [
        Line(
            item,
            np.asarray(item.start, np.float64) * scale,
            np.asarray(item.end, np.float64) * scale,
            item.anchor or config.anchor,
        )
        for item in config.lines
        if item.source in (None, source_id)
    ]
    zones = [
        Zone(
            item,
            shapely.Polygon(np.asarray(item.polygon, np.float64) * scale),
            item.anchor or config.anchor,
        )
        for item in config.zones
        if item.source in (None, source_id)
    ]
    return lines, zones
