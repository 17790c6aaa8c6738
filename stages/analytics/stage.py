"""The ``analytics`` node: line crossings, zone entries, exits, dwell and crowding for tracked
objects, per source, as events that travel with their frame to the event sinks."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, FrameAnalytics, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.pipeline.validation import suggest, validate
from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.counting import SourceAnalytics
from vapipe.stages.analytics.geometry import compile_geometry, geometry_problems

log = logging.getLogger(__name__)


@register("analytics")
class AnalyticsStage(Stage):
    """Counts tracked objects across lines and follows them through zones (shapely)."""

    reads_pixels = False

    Config = AnalyticsConfig
    config: AnalyticsConfig
    needs_upstream = ("track",)
    emitted = 0

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.sources: dict[str, SourceAnalytics] = {}

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
        self.sources = {}
        self.emitted = 0
        # Geometry replaced for one source while it runs (run-pipeline serve), applied at its
        # next frame; taken from another thread.
        self.replaced: dict[str, AnalyticsConfig] = {}
        self._pending: dict[str, AnalyticsConfig] = {}
        self._lock = threading.Lock()

    def replace_geometry(self, source_id: str, lines: Any, zones: Any, where: str) -> None:
        """Lines and zones of ``source_id`` from its next frame on, checked as the config's
        are (ConfigError naming ``where``); counts of the lines whose name stays carry on."""
        table = self.config.model_dump(exclude_unset=True, exclude={"lines", "zones"})
        table.update(lines=lines, zones=zones)
        config = validate(AnalyticsConfig, table, where, "", node=self.name)
        for item in [*config.lines, *config.zones]:
            if item.source not in (None, source_id):
                raise ConfigError(f"'{item.name}' names source '{item.source}'", key="source")
        with self._lock:
            self._pending[source_id] = self.replaced[source_id] = config

    def geometry(self, source_id: str) -> dict[str, Any]:
        """The lines and zones that apply to ``source_id`` now, as the config writes them."""
        config = self.replaced.get(source_id, self.config)
        wanted = (None, source_id)
        return {
            "lines": [i.model_dump(exclude_unset=True) for i in config.lines if i.source in wanted],
            "zones": [i.model_dump(exclude_unset=True) for i in config.zones if i.source in wanted],
        }

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.detections is None:
            raise PipelineError("frame has no detections: link a track node before analytics")
        if frame.detections.track_id is None:
            raise PipelineError("detections have no track ids: link a track node before analytics")
        state = self.sources.get(frame.source_id)
        with self._lock:
            replaced = self._pending.pop(frame.source_id, None)
        if replaced is not None and state is not None:
            state = self.sources[frame.source_id] = self._rebuilt(frame, state, replaced)
        if state is None:
            if not self.sources:
                self._check_classes(frame.detections.names)
            config = self.replaced.get(frame.source_id, self.config)
            state = self.sources[frame.source_id] = self._state(frame, config)
        origins = frame.track_origins
        for event in state.update(frame.detections, frame.pts, frame.predicted, origins):
            frame.events.append({**event, "source_id": frame.source_id, "seq": frame.seq})
            self.emitted += 1
        frame.analytics = FrameAnalytics(state.summary(), tuple(state.lines), tuple(state.zones))
        return (frame,)

    def _state(self, frame: Frame, config: AnalyticsConfig) -> SourceAnalytics:
        height, width = frame.shape[:2]
        lines, zones = compile_geometry(config, frame.source_id, width, height)
        for problem in geometry_problems(lines, zones, frame.source_id, width, height):
            log.warning("%s", problem)
        return SourceAnalytics(config, lines, zones)

    def _rebuilt(
        self, frame: Frame, old: SourceAnalytics, config: AnalyticsConfig
    ) -> SourceAnalytics:
        state = self._state(frame, config)
        before = {line.config.name: line for line in old.lines}
        for line in state.lines:
            kept = before.get(line.config.name)
            if kept is not None:  # by direction, whatever the directions are called now
                line.counts = {
                    line.config.in_label: kept.counts[kept.config.in_label],
                    line.config.out_label: kept.counts[kept.config.out_label],
                }
        return state

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

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":  # a service's stream: its counts go with it
            self.sources.pop(message.source_id, None)
            with self._lock:
                self.replaced.pop(message.source_id, None)
                self._pending.pop(message.source_id, None)
        return (message,)

    def stats(self) -> dict[str, Any]:
        sources = self.sources
        return {
            "events": self.emitted,
            "counts": {source: state.summary()["lines"] for source, state in sources.items()},
        }
