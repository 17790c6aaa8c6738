"""Lines and zones as a config declares them, checked with shapely when the config loads."""

from __future__ import annotations

from typing import Annotated, Literal

import shapely
from pydantic import Field, model_validator
from shapely.validation import explain_validity

from vapipe.pipeline.stage import StageConfig

Anchor = Literal[
    "bottom_center",
    "center",
    "top_center",
    "bottom_left",
    "bottom_right",
    "top_left",
    "top_right",
    "center_left",
    "center_right",
]
MAX_COORDINATE = 1e6
Coordinate = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_COORDINATE, le=MAX_COORDINATE)]
"""Finite, and within a million pixels of the frame: anything else is a typo."""
Point = list[Coordinate]
SUMMARY_KEYS = frozenset({"by_class", "by_attribute"})
"""Keys of a line's counts beside its two direction labels."""


class LineConfig(StageConfig):
    """A counting line: a segment that tracked objects' anchor points cross. Looking from
    ``start`` towards ``end`` on screen, a crossing from the left side to the right side is
    ``in`` and the other way ``out`` (a line drawn top to bottom counts leftward motion as
    ``in``)."""

    name: str = Field(min_length=1)
    """Named in every event and count."""
    start: Point = Field(min_length=2, max_length=2)
    """``[x, y]``, in pixels or, with ``normalized = true``, fractions of the frame."""
    end: Point = Field(min_length=2, max_length=2)
    """``[x, y]``, the other end."""
    source: str | None = None
    """The source_id this line belongs to; default: every source."""
    classes: list[str] | None = None
    """Class names counted (``["car", "truck"]``); default: all."""
    anchor: Anchor | None = None
    """The point of a box that crosses; default: the node's ``anchor``."""
    normalized: bool | None = None
    """Coordinates are fractions of the frame (0-1); default: the node's ``normalized``."""
    in_label: str = "in"
    """The name of the left-to-right direction in events and counts (``northbound``...)."""
    out_label: str = "out"
    """The name of the right-to-left direction."""

    @model_validator(mode="after")
    def _has_length(self) -> LineConfig:
        if self.start == self.end:
            raise ValueError(f"line '{self.name}': start and end are the same point")
        if self.in_label == self.out_label:
            raise ValueError(f"line '{self.name}': in_label and out_label must differ")
        for label in (self.in_label, self.out_label):
            if label in SUMMARY_KEYS:
                raise ValueError(
                    f"line '{self.name}': '{label}' is a key of the counts already; "
                    "name the direction otherwise"
                )
        return self


class ZoneConfig(StageConfig):
    """A zone: a polygon that tracked objects' anchor points enter, stay in and leave."""

    name: str = Field(min_length=1)
    """Named in every event and in the frame's occupancy."""
    polygon: list[Point] = Field(min_length=3)
    """``[[x, y], ...]``, at least three corners, not crossing itself."""
    source: str | None = None
    """The source_id this zone belongs to; default: every source."""
    classes: list[str] | None = None
    """Class names that count (``["person"]``); default: all."""
    anchor: Anchor | None = None
    """The point of a box that must be inside; default: the node's ``anchor``."""
    normalized: bool | None = None
    """Corners are fractions of the frame (0-1); default: the node's ``normalized``."""
    dwell_s: float | None = Field(None, gt=0)
    """A ``zone_dwell`` event when an object stays longer than this, once per visit."""
    max_objects: int | None = Field(None, ge=0)
    """``zone_crowded`` when more objects than this are inside, ``zone_clear`` when no more."""

    @model_validator(mode="after")
    def _is_simple_polygon(self) -> ZoneConfig:
        if any(len(point) != 2 for point in self.polygon):
            raise ValueError(f"zone '{self.name}': every corner is [x, y]")
        polygon = shapely.Polygon(self.polygon)
        # A bow-tie's halves cancel to no area too: tell it from corners all on one line.
        if polygon.area <= 0 and shapely.LineString(self.polygon).is_simple:
            raise ValueError(f"zone '{self.name}': the polygon has no area")
        if not polygon.is_valid:
            raise ValueError(f"zone '{self.name}': invalid polygon ({explain_validity(polygon)})")
        return self


class AnalyticsConfig(StageConfig):
    """Lines and zones, in pixels or normalised 0-1 coordinates, per source or for all."""

    lines: list[LineConfig] = Field(default_factory=list)
    """Counting lines: ``[{ name = "road", start = [x, y], end = [x, y] }, ...]``."""
    zones: list[ZoneConfig] = Field(default_factory=list)
    """Zones: ``[{ name = "bay", polygon = [[x, y], ...], dwell_s = 120 }, ...]``."""
    normalized: bool = False
    """Coordinates are fractions of the frame's width and height (0-1), not pixels; a line or
    zone may say otherwise with its own ``normalized``."""
    anchor: Anchor = "bottom_center"
    """The point of each box that lines and zones test (bottom centre: where it stands)."""
    hysteresis_px: float = Field(4.0, ge=0)
    """An anchor nearer than this to a line or a zone's edge (or than ``hysteresis_depth`` of
    its box's size, whichever is more) keeps its previous side, so an object jittering on
    the line counts once."""
    hysteresis_depth: float = Field(0.05, ge=0, le=1)
    """The same band as a fraction of the object's own size, its box's height. One setting
    for a far walker and a near bus, at 360p and at 1080p."""
    min_crossing_frames: int = Field(1, ge=1, le=1000)
    """A crossing counts once the object has been seen this many frames on the new side
    (and deep enough past the line); going back before that counts nothing."""
    min_crossing_depth: float = Field(0.25, ge=0, le=10)
    """How far past the line an object must get for its crossing to count (from the line to
    the anchor), as a fraction of its own box's height: someone walking along the line,
    swinging either side of it, never does. Scales with the object, so it holds for a dog and
    a bus, at 360p and 1080p (0.25: the best on the accuracy benchmark's tuning clips)."""
    min_crossing_px: float = Field(12.0, ge=0)
    """The least depth in pixels, whatever the box's size: a small box's jitter is a few
    pixels whatever its size."""
    lost_s: float = Field(1.0, ge=0)
    """A track not seen for this long (stream seconds) has left its zones (``zone_exit``
    with ``reason = "lost"``)."""
    unseen_crossings: bool = True
    """After frames the detector skipped (``infer.interval``, a motion node), an object first
    seen past a line may have crossed it unseen: its track is placed where its motion (from
    its first two sightings) puts it when the detector last looked, and counts if that was on
    the other side, unless a track that had already crossed lost its object there (the same
    object under a new id). Only over up to ``lost_s`` unseen (not a long stillness or an
    outage); every-frame detection is not affected."""

    @model_validator(mode="after")
    def _consistent(self) -> AnalyticsConfig:
        for kind, items in (("line", self.lines), ("zone", self.zones)):
            names = [item.name for item in items]
            for name in names:
                if names.count(name) > 1:
                    raise ValueError(f"{kind} '{name}' is declared twice")
        for line in self.lines:
            if self.is_normalized(line):
                _check_unit(f"line '{line.name}'", [line.start, line.end])
        for zone in self.zones:
            if self.is_normalized(zone):
                _check_unit(f"zone '{zone.name}'", zone.polygon)
        if not self.lines and not self.zones:
            raise ValueError("no lines and no zones: give at least one")
        return self

    def is_normalized(self, item: LineConfig | ZoneConfig) -> bool:
        return self.normalized if item.normalized is None else item.normalized


def _check_unit(what: str, points: list[Point]) -> None:
    if any(not 0 <= value <= 1 for point in points for value in point):
        raise ValueError(f"{what}: normalized coordinates must lie within 0-1")
