"""The service's history routes: past events from the graph's ``history`` node (SQLite),
counts per line over time, and the snapshots and clips of the graph's media nodes under
``/media/`` (with HTTP range requests, so a browser seeks in a clip)."""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from vapipe.pipeline.graph import Graph
from vapipe.pipeline.validation import cut
from vapipe.serve.streams import StreamError
from vapipe.stages.events.records import Record
from vapipe.stages.events.store import BadCursor, EventStore, Query, epoch_of

MEDIA_KEYS = ("snapshot", "snapshot_crop", "clip")
MEDIA_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".mp4": "video/mp4"}
MAX_LIMIT = 1000
MAX_BUCKETS = 10_000
DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def history_path(graph: Graph) -> Path | None:
    """The history the graph's history node keeps (the stage declares it), if it has one."""
    for node in graph.nodes.values():
        path = node.stage_cls.history_file(node.config)
        if path is not None:
            return Path(path)
    return None


def media_dirs(graph: Graph) -> list[Path]:
    """The folders whose files the graph's events name (the stages declare them)."""
    found: list[Path] = []
    for node in graph.nodes.values():
        folder_name = node.stage_cls.media_folder(node.config)
        if folder_name is None:
            continue
        folder = Path(os.path.realpath(folder_name))
        if folder not in found:
            found.append(folder)
    return found


def seconds(text: str, key: str) -> float:
    """``5m`` -> 300; ``90`` -> 90."""
    match = DURATION.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise StreamError(400, f"{key}: expected a duration like 30s, 5m, 1h or 1d, got '{text}'")
    return float(match.group(1)) * UNITS[match.group(2)]


def instant(text: str | None, key: str) -> float | None:
    """An ISO-8601 time or seconds since 1970."""
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise StreamError(400, f"{key}: expected a finite time, got '{cut(text, 40)}'")
        return value
    try:
        return epoch_of(text)
    except ValueError:
        raise StreamError(
            400, f"{key}: expected an ISO-8601 time or epoch seconds, got '{text}'"
        ) from None


def with_urls(record: Record) -> Record:
    """The event, and where its pictures and clip are served."""
    urls = {key: f"/media/{record[key]}" for key in MEDIA_KEYS if isinstance(record.get(key), str)}
    return {**record, "urls": urls} if urls else record


def _plate_distance(text: str) -> int:
    if not re.fullmatch(r"[0-3]", text):
        raise StreamError(400, f"plate_distance: expected 0 to 3, got '{cut(text, 40)}'")
    return int(text)


def history_routes(graph: Graph) -> list[Route]:
    database = history_path(graph)
    folders = media_dirs(graph)

    def store() -> EventStore:
        if database is None:
            raise StreamError(404, "no event history: add a [nodes.history] node to the graph")
        try:
            return EventStore(database, readonly=True)
        except sqlite3.Error as exc:
            raise StreamError(503, f"the event history {database} cannot be read: {exc}") from None

    def read(work: Any) -> Any:
        kept = store()
        try:
            return work(kept)
        except sqlite3.Error as exc:
            raise StreamError(503, f"the event history cannot be read: {exc}") from None
        finally:
            kept.close()

    async def history(request: Request) -> Response:
        params = request.query_params
        limit = params.get("limit", "100")
        # ASCII digits only: str.isdigit() takes '²', which int() refuses.
        if not re.fullmatch(r"[0-9]{1,9}", limit) or not 1 <= int(limit) <= MAX_LIMIT:
            raise StreamError(400, f"limit: expected 1 to {MAX_LIMIT}, got '{cut(limit, 40)}'")
        query = Query(
            source=params.get("source") or None,
            type=params.get("type") or None,
            line=params.get("line") or None,
            zone=params.get("zone") or None,
            attribute=params.get("attribute") or None,
            plate=params.get("plate") or None,
            plate_distance=_plate_distance(params.get("plate_distance", "0")),
            since=instant(params.get("since"), "since"),
            until=instant(params.get("until"), "until"),
            limit=int(limit),
            cursor=params.get("cursor") or None,
        )

        def page(kept: EventStore) -> tuple[list[Record], str | None]:
            try:
                return kept.history(query)
            except BadCursor as exc:
                raise StreamError(400, str(exc)) from None

        events, following = await anyio.to_thread.run_sync(read, page)
        return JSONResponse({"events": [with_urls(e) for e in events], "next": following})

    async def one_event(request: Request) -> Response:
        event_id = request.path_params["id"]
        found = await anyio.to_thread.run_sync(read, lambda kept: kept.get(event_id))
        if found is None:
            raise StreamError(404, f"no event '{event_id}' in the history")
        return JSONResponse(with_urls(found))

    async def counts(request: Request) -> Response:
        params = request.query_params
        line = params.get("line")
        if not line:
            raise StreamError(400, "line: which line's counts (?line=NAME)")
        bucket = seconds(params.get("bucket", "5m"), "bucket")
        since = instant(params.get("since"), "since")
        until = instant(params.get("until"), "until")
        if (
            since is not None
            and (min(until or time.time(), time.time()) - since) / bucket > MAX_BUCKETS
        ):
            raise StreamError(400, f"bucket: more than {MAX_BUCKETS} buckets; a longer one")
        buckets = await anyio.to_thread.run_sync(
            read, lambda kept: kept.counts(line, bucket, since, until, params.get("source") or None)
        )
        return JSONResponse({"line": line, "bucket_s": bucket, "buckets": buckets})

    async def media(request: Request) -> Response:
        wanted = request.path_params["path"]
        for folder in folders:
            try:
                path = Path(os.path.realpath(folder / wanted))
                found = folder in path.parents and path.is_file() and path.suffix in MEDIA_TYPES
            except (ValueError, OSError):  # a NUL byte, a name too long: no such file
                break
            if found:
                return FileResponse(path, media_type=MEDIA_TYPES[path.suffix])
        raise StreamError(404, f"no media file '{cut(wanted.replace(chr(0), '%00'), 120)}'")

    return [
        Route("/api/events/history", history, methods=["GET"]),
        Route("/api/events/{id:path}", one_event, methods=["GET"]),
        Route("/api/counts", counts, methods=["GET"]),
        Route("/media/{path:path}", media, methods=["GET"]),
    ]
