"""JSON-lines events: each frame's ``frame`` event and the events it caused, one object per
line, flushed per line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.sinks.paths import output_path, paths_for
from vapipe.stages.sinks.records import frame_records, message_record


class EventsConfig(StageConfig):
    """Where the JSON lines go and which frames get one."""

    path: str = "-"
    """Output file (``{source_id}`` allowed: one file per source), or ``-`` for stdout."""
    append: bool = False
    """Append to an existing file instead of replacing it."""
    empty_frames: bool = True
    """Write ``frame`` events for frames without detections too."""


@register("events")
class EventsSink(Stage):
    """Writes events as JSON lines; a killed run leaves only whole lines."""

    Config = EventsConfig
    config: EventsConfig

    @classmethod
    def files_written(cls, config: Any, source_ids: Sequence[str]) -> list[str]:
        return paths_for(config.path, source_ids)

    def open(self, context: StageContext) -> None:
        self._files: dict[str, IO[str]] = {}
        self.lines = 0

    def _file(self, source_id: str) -> IO[str]:
        path = self.config.path
        key = source_id if "{source_id}" in path else ""
        handle = self._files.get(key)
        if handle is None:
            if path == "-":
                handle = sys.stdout
            else:
                mode = "a" if self.config.append else "w"
                handle = open(output_path(path, source_id), mode, encoding="utf-8")  # noqa: SIM115
            self._files[key] = handle
        return handle

    def write(self, event: dict[str, Any]) -> None:
        handle = self._file(str(event.get("source_id", "")))
        # One write of a whole line, then flush: a reader never sees half an object.
        handle.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        handle.flush()
        self.lines += 1

    def process(self, frame: Frame) -> tuple[Frame]:
        for record in frame_records(frame, empty_frames=self.config.empty_frames):
            self.write(record)
        return (frame,)

    def handle_message(self, message: Message) -> tuple[Message]:
        self.write(message_record(message))
        return (message,)

    def close(self) -> None:
        for handle in self._files.values():
            if handle is not sys.stdout:
                handle.close()
        self._files.clear()

    def stats(self) -> dict[str, Any]:
        return {"lines": getattr(self, "lines", 0)}
