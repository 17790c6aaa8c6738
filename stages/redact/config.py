"""What a ``redact`` node hides, and how."""

from __future__ import annotations

from typing import Literal

import shapely
from pydantic import Field, model_validator

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.analytics.config import Point


class AreaConfig(StageConfig):
    """A fixed area of a camera's picture, hidden on every frame (a neighbour's window, a
    screen, a door number)."""

    polygon: list[Point] = Field(min_length=3)
    """``[[x, y], ...]``, at least three corners, in pixels or (``normalized``) fractions."""
    source: str | None = None
    """The source_id it belongs to; default: every source."""
    normalized: bool | None = None
    """Corners are fractions of the frame (0-1); default: the node's ``normalized``."""

    @model_validator(mode="after")
    def _has_area(self) -> AreaConfig:
        if any(len(point) != 2 for point in self.polygon):
            raise ValueError("every corner is [x, y]")
        if shapely.Polygon(self.polygon).area <= 0:
            raise ValueError("the polygon has no area")
        return self


class RedactConfig(StageConfig):
    """What is hidden (objects by class, the boxes a ``detect_inside`` node found, fixed
    areas) and how. Nodes before it and its own results see the original pixels; every node
    after it sees only the redacted ones."""

    classes: list[str] = Field(default_factory=list)
    """Objects hidden whole, by class name (``["person"]``, ``["car"]``)."""
    inside: str | None = None
    """A ``detect_inside`` node whose boxes are hidden (faces found inside people)."""
    missing: Literal["object", "none"] = "object"
    """An object that node looks inside but whose boxes are not there on a frame (its face
    not found yet, or turned away): ``object`` hides the object's whole box instead (nothing
    is shown that may hold a face), ``none`` hides nothing of it."""
    areas: list[AreaConfig] = Field(default_factory=list)
    """Fixed areas: ``[{ polygon = [[x, y], ...], source = "cam" }, ...]``."""
    normalized: bool = False
    """Area corners are fractions of the frame's width and height (0-1), not pixels."""
    method: Literal["blur", "pixelate", "fill"] = "blur"
    """``blur``: a smooth wash of the region's colours; ``pixelate``: coarse blocks;
    ``fill``: one flat colour."""
    cells: int = Field(6, ge=1, le=64)
    """What ``blur`` and ``pixelate`` leave: this many cells across a region's shorter side,
    whatever its size (fewer hides more)."""
    color: list[int] = Field(default_factory=lambda: [0, 0, 0], min_length=3, max_length=3)
    """``fill``'s colour, ``[r, g, b]`` 0-255."""
    grow: float = Field(0.1, ge=0, le=1)
    """Each box is grown by this fraction of its width and height on every side (a detector's
    box is tight; hair and ears are not inside it)."""
    hold_s: float = Field(0.5, ge=0, le=10)
    """A tracked object missing from a frame (the detector unsure for a moment) stays hidden
    where it was last seen for this long (stream seconds)."""

    @model_validator(mode="after")
    def _something(self) -> RedactConfig:
        if not (self.classes or self.inside or self.areas):
            raise ValueError("nothing to redact: set classes, inside or areas")
        if any(not 0 <= value <= 255 for value in self.color):
            raise ValueError("color: three values 0-255")
        return self
