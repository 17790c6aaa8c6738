"""An analytics event as its record carries it: its own keys, and the files media sinks wrote
for it (``Frame.event_files``), which ``records.frame_records`` merges in."""

from __future__ import annotations

from typing import Any

from vapipe.pipeline.frame import Frame


def written(frame: Frame, index: int = 0) -> dict[str, Any]:
    files = frame.event_files.get(index)
    return {**frame.events[index], **(files.fields() if files is not None else {})}
