"""The service's HTTP API (Starlette, served by uvicorn): health, streams, live events (SSE),
metrics (Prometheus), previews (JPEG, MJPEG) and the page. Paths are listed in docs/api.md.

Every error is ``{"error": "one line"}`` with a status; nothing here ever answers with a
traceback or a secret. With a token, every path but ``/healthz`` needs
``Authorization: Bearer TOKEN``."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from vapipe.pipeline.event_hub import Subscriber
from vapipe.pipeline.prom import ServiceCollector
from vapipe.pipeline.service import StreamError, Streams
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.sinks.records import to_json

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
KEEPALIVE_S = 15.0
POLL_S = 0.05


def error(status: int, message: str) -> JSONResponse:
    line = " ".join(mask_credentials(message).splitlines())
    return JSONResponse({"error": line}, status_code=status)


PAGE_FILES = {"/": "index.html", "/static/page.js": "page.js", "/static/page.css": "page.css"}
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def is_public(path: str) -> bool:
    """Health, and the page's own files (no data in them: the page asks for the token and
    sends it with every request for data)."""
    return path == "/healthz" or path in PAGE_FILES


class Guard(BaseHTTPMiddleware):
    """The token, the body limit, and one line instead of a traceback."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if self.token is not None and not is_public(request.url.path):
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return error(401, "unauthorized")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return error(413, f"request body over {MAX_BODY} bytes")
        try:
            return await call_next(request)
        except Exception as exc:
            log.debug("request %s %s failed", request.method, request.url.path, exc_info=exc)
            return error(500, f"internal error: {type(exc).__name__}: {exc}")


async def json_body(request: Request) -> Any:
    # A chunked body has no length to check beforehand: it is read only up to the limit,
    # never whole first (a client could send gigabytes).
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise StreamError(413, f"request body over {MAX_BODY} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StreamError(400, f"the body is not JSON: {exc}") from None


def make_app(service: Streams, token: str | None = None) -> Starlette:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ServiceCollector(service))
    settings = service.settings
    stopping = service.stopping

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready, reason = service.ready()
        return JSONResponse({"ready": ready, "reason": reason}, status_code=200 if ready else 503)

    async def list_streams(request: Request) -> Response:
        return JSONResponse(service.streams())

    async def one_stream(request: Request) -> Response:
        return JSONResponse(service.describe(request.path_params["id"]))

    async def add_stream(request: Request) -> Response:
        added = await anyio.to_thread.run_sync(service.add, await json_body(request))
        return JSONResponse(added, status_code=201)

    async def remove_stream(request: Request) -> Response:
        removed = await anyio.to_thread.run_sync(service.remove, request.path_params["id"])
        return JSONResponse(removed)

    async def get_analytics(request: Request) -> Response:
        return JSONResponse(service.geometry(request.path_params["id"]))

    async def put_analytics(request: Request) -> Response:
        body = await json_body(request)
        return JSONResponse(service.replace_geometry(request.path_params["id"], body))

    async def config(request: Request) -> Response:
        return JSONResponse(service.effective_config())

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def events(request: Request) -> Response:
        kinds = request.query_params.get("type")
        subscriber = service.hub.subscribe(
            Subscriber(
                source=request.query_params.get("source"),
                kinds=frozenset(kinds.split(",")) if kinds else None,
                size=settings.events_buffer,
            )
        )

        async def stream() -> AsyncIterator[str]:
            quiet_since = time.monotonic()
            try:
                yield ": vapipe live events\n\n"
                while not stopping.is_set():
                    items, dropped = subscriber.take()
                    if dropped:
                        yield f": dropped {dropped} events (this client reads too slowly)\n\n"
                    for item in items:
                        yield f"data: {to_json(item)}\n\n"
                    if items or dropped:
                        quiet_since = time.monotonic()
                    elif time.monotonic() - quiet_since > KEEPALIVE_S:
                        yield ": keepalive\n\n"
                        quiet_since = time.monotonic()
                    await asyncio.sleep(POLL_S)
            finally:
                service.hub.unsubscribe(subscriber)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def snapshot(request: Request) -> Response:
        preview = await anyio.to_thread.run_sync(
            service.preview, request.path_params["id"], settings.preview_width
        )
        if preview is None:
            return error(404, "no frame yet")
        return Response(preview[1], media_type="image/jpeg")

    async def mjpeg(request: Request) -> Response:
        stream_id = request.path_params["id"]
        service.describe(stream_id)  # 404 for an unknown stream

        async def parts() -> AsyncIterator[bytes]:
            sent = None
            while not stopping.is_set():
                started = time.monotonic()
                try:
                    preview = await anyio.to_thread.run_sync(
                        service.preview, stream_id, settings.preview_width, sent
                    )
                except StreamError:  # the stream was removed meanwhile
                    break
                if preview is not None:
                    sent, jpeg = preview
                    yield (
                        b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: "
                        + str(len(jpeg)).encode()
                        + b"\r\n\r\n"
                        + jpeg
                        + b"\r\n"
                    )
                await asyncio.sleep(
                    max(0.0, 1 / settings.preview_fps - (time.monotonic() - started))
                )

        return StreamingResponse(parts(), media_type="multipart/x-mixed-replace; boundary=frame")

    async def page(request: Request) -> Response:
        name = PAGE_FILES[request.url.path]
        text = resources.files("vapipe.pipeline").joinpath("web", name).read_text("utf-8")
        media = CONTENT_TYPES[name[name.rindex(".") :]]
        return Response(text, media_type=media, headers={"Cache-Control": "no-cache"})

    async def stream_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StreamError)
        return error(exc.status, exc.message)

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such path: {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error(405, f"{request.method} is not allowed on {request.url.path}")

    routes = [
        *(Route(path, page) for path in PAGE_FILES),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/api/streams", list_streams, methods=["GET"]),
        Route("/api/streams", add_stream, methods=["POST"]),
        Route("/api/streams/{id}", one_stream, methods=["GET"]),
        Route("/api/streams/{id}", remove_stream, methods=["DELETE"]),
        Route("/api/streams/{id}/analytics", get_analytics, methods=["GET"]),
        Route("/api/streams/{id}/analytics", put_analytics, methods=["PUT"]),
        Route("/api/config", config),
        Route("/api/events", events),
        Route("/metrics", metrics),
        Route("/streams/{id}/snapshot.jpg", snapshot),
        Route("/streams/{id}/mjpeg", mjpeg),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token)],
        exception_handlers={StreamError: stream_error, 404: not_found, 405: not_allowed},
    )
