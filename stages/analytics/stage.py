"""The ``analytics`` node: line crossings, zone entries, exits, dwell and crowding for tracked
objects, per source, as events that travel with their frame to the event sinks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageContext
from vapipe.pipeline.validation import suggest
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.counting import SourceAnalytics
from vapipe.stages.analytics.geometry import Line, Zone, compile_geometry, geometry_problems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrameAnalytics:
    """What the analytics knew at one frame: counts and occupancy (a snapshot, for the frame
    event), and the source's lines and zones in pixels (for drawing)."""

    summary: dict[str, Any]
    lines: tuple[Line, ...]
    zones: tuple[Zone, ...]


@register("analytics")
class AnalyticsStage(Stage):
    """Counts tracked objects across lines and follows them through zones (shapely)."""

    reads_pixels = False

    Config = AnalyticsConfig
    config: AnalyticsConfig
    needs_upstream = ("track",)

    @classmethod
    def check_for_sources(cls, config: AnalyticsConfig, source_ids: Sequence[str]) -> None:
        """A line or zone for a source the run does not have does nothing: said now."""
        for kind, items in (("line", config.lines), ("zone", config.zones)):
            for item in items:
                if item.source is not None and item.source not in source_ids:
                    log.warning(
                        "%s '%s' is for source '%s', which this run does not have (sources: "
                        "%s): it will count nothing",
                        kind, item.name, item.source, ", ".join(source_ids),
                    )  # fmt: skip

    def open(self, context: StageContext) -> None:
        self.sources: dict[str, SourceAnalytics] = {}
        self.emitted = 0

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.detections is None:
            raise PipelineError("frame has no detections: link a track node before analytics")
        if frame.detections.track_id is None:
            raise PipelineError("detections have no track ids: link a track node before analytics")
        state = self.sources.get(frame.source_id)
        if state is None:
            if not self.sources:
                self._check_classes(frame.detections.names)
            height, width = frame.shape[:2]
            lines, zones = compile_geometry(self.config, frame.source_id, width, height)
            for problem in geometry_problems(lines, zones, frame.source_id, width, height):
                log.warning("%s", problem)
            state = self.sources[frame.source_id] = SourceAnalytics(self.config, lines, zones)
        for event in state.update(frame.detections, frame.pts):
            frame.events.append({**event, "source_id": frame.source_id, "seq": frame.seq})
            self.emitted += 1
        frame.analytics = FrameAnalytics(state.summary(), tuple(state.lines), tuple(state.zones))
        return (frame,)

    def _check_classes(self, names: Sequence[str]) -> None:
        """A class the model does not have never counts: said once, at the first frame."""
        if not names:
            return
        for kind, items in (("line", self.config.lines), ("zone", self.config.zones)):
            for item in items:
                for wanted in item.classes or ():
                    if wanted not in names:
                        log.warning(
                            "%s '%s': the model has no class '%s'%s: it will never count",
                            kind, item.name, wanted, suggest(wanted, list(names)),
                        )  # fmt: skip

    def stats(self) -> dict[str, Any]:
        sources = getattr(self, "sources", {})
        return {
            "events": getattr(self, "emitted", 0),
            "counts": {source: state.summary()["lines"] for source, state in sources.items()},
        }
