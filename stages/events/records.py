"""Frames and in-band messages as event records (JSON-ready dicts), shared by every event
sink so a file, a broker and a webhook receive the same objects. The schema of each event
type is docs/events.schema.json."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.object_results import as_events

Record = dict[str, Any]

log = logging.getLogger(__name__)


def iso_time(epoch_s: float) -> str:
    return (
        datetime.fromtimestamp(epoch_s, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def frame_records(frame: Frame, *, empty_frames: bool = True) -> Iterator[Record]:
    """The frame's ``frame`` event (unless it has no detections and ``empty_frames`` is off),
    then the events it caused, each stamped with the frame's time."""
    when = {"pts": round(frame.pts, 6), "time": iso_time(frame.capture_time)}
    detections = frame.detections
    if empty_frames or (detections is not None and len(detections)):
        record: Record = {
            "event": "frame",
            "source_id": frame.source_id,
            "seq": frame.seq,
            **when,
            "detections": detections.to_records() if detections is not None else [],
        }
        if frame.predicted:  # infer.interval: the tracker's boxes, not the detector's
            record["predicted"] = True
        if frame.motion is not None:  # a motion node looked: did anything move?
            record["motion"] = not frame.motion.still
        if frame.analytics is not None:
            record["analytics"] = frame.analytics.summary
        yield record
    for index, event in enumerate(frame.events):
        files = frame.event_files.get(index)
        yield {
            "event": event["event"],
            "id": event_id(frame.source_id, frame.seq, event),
            "source_id": frame.source_id,
            "seq": frame.seq,
            **when,
            **{
                k: _json_ready(k, v)
                for k, v in event.items()
                if k not in ("event", "source_id", "seq")
            },
            **(files.fields() if files is not None else {}),
        }


def _json_ready(key: str, value: Any) -> Any:
    """An analytics event's value as its record carries it: the track's object results as
    JSON, without vectors (long, and on every frame event already where asked for)."""
    return as_events(value, vector=False) if key == "attributes" else value


def event_id(source_id: str, seq: int, event: dict[str, Any]) -> str:
    """``source/seq/type/track/line-or-zone`` (``-`` for what the event has not): the same for
    the same event whenever it is made again (a restarted shard reads its frames again), so
    that a consumer can drop one it has had."""
    track = event.get("track_id")
    sighting = event.get("sighting")  # a plates node on the whole frame: no track
    where = event.get("line") or event.get("zone") or (f"s{sighting}" if sighting else None)
    return "/".join(
        (source_id, str(seq), event["event"], "-" if track is None else str(track), where or "-")
    )


class NonFinite:
    """A sink's count of the values JSON cannot hold (NaN, infinity: a model's output gone
    wrong) that it wrote as null; the first one is logged, naming the event and the field."""

    def __init__(self, sink: str) -> None:
        self.sink = sink
        self.count = 0

    def add(self, record: Record, fields: list[str]) -> None:
        if not self.count:
            log.warning(
                "%s: a %s event held %s (NaN or infinity), written as null; "
                "counted as non_finite in --stats",
                self.sink, record.get("event", "?"), _field_list(fields),
            )  # fmt: skip
        self.count += len(fields)


def _field_list(fields: list[str]) -> str:
    shown = ", ".join(fields[:3])
    return f"{shown} and {len(fields) - 3} more" if len(fields) > 3 else shown


def to_json(record: Record, non_finite: NonFinite | None = None) -> str:
    """One compact JSON object. NaN and infinity are not JSON: each is written as null, so
    that every line parses and the event is not lost, and counted in ``non_finite`` (nms drops
    non-finite detections; a second model's vector or score can still hold them)."""
    try:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # only out-of-range floats: the rare path walks the record
        fields: list[str] = []
        finite = _finite(record, "", fields)
        if non_finite is not None:
            non_finite.add(record, fields)
        return json.dumps(finite, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _finite(value: Any, where: str, fields: list[str]) -> Any:
    """``value`` with each non-finite float as None; their dotted paths added to ``fields``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        fields.append(where or "(the value)")
        return None
    if isinstance(value, dict):
        return {
            k: _finite(v, f"{where}.{k}" if where else str(k), fields) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_finite(v, f"{where}[{i}]", fields) for i, v in enumerate(value)]
    return value


def message_record(message: Message) -> Record:
    """An in-band message (``source_down``, ``source_up``) as an event."""
    return {
        "event": message.kind,
        "source_id": message.source_id,
        "seq": message.seq,
        "pts": message.pts,
        "time": iso_time(message.time),
        **message.data,
    }


EVENT_TYPES = (
    "frame", "line_cross", "zone_enter", "zone_exit", "zone_dwell", "zone_crowded",
    "zone_clear", "plate", "source_down", "source_up", "source_removed",
)  # fmt: skip
"""The event types the built-in stages emit (docs/events.schema.json)."""
