"""The service's HTTP API (Starlette, served by uvicorn): health, streams, live events (SSE),
metrics (Prometheus), previews (JPEG, MJPEG) and the page. Paths are listed in docs/api.md.

Every error is ``{"error": "one line"}`` with a status; nothing here ever answers with a
traceback or a secret. With a token, every path but ``/healthz`` needs
``Authorization: Bearer TOKEN``."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from vapipe.pipeline.config import ServeSettings
from vapipe.pipeline.urls import mask_credentials
from vapipe.serve.event_hub import Subscriber
from vapipe.serve.history_api import history_routes
from vapipe.serve.prometheus import ServiceCollector
from vapipe.serve.streams import StreamError, Streams
from vapipe.stages.events.records import to_json

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20
KEEPALIVE_S = 15.0
POLL_S = 0.05
LIVE_START_S = 10.0
"""How long a live video's first viewer waits for its first picture to be encoded."""


def error(status: int, message: str) -> JSONResponse:
    line = " ".join(mask_credentials(message).splitlines())
    return JSONResponse({"error": line}, status_code=status)


PAGE_FILES = {
    "/": "index.html",
    "/static/page.js": "page.js",
    "/static/history.js": "history.js",
    "/static/live.js": "live.js",
    "/static/page.css": "page.css",
}
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def is_public(path: str) -> bool:
    """Health, and the page's own files (no data in them: the page asks for the token and
    sends it with every request for data)."""
    return path in ("/healthz", "/favicon.ico") or path in PAGE_FILES


MEDIA_COOKIE = "vapipe_token"
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def host_name(header: str) -> str:
    """The name in a ``Host`` header: ``[::1]:8080`` -> ``::1``, ``cam.lan:80`` -> ``cam.lan``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def is_loopback(host: str) -> bool:
    """An address to listen on that only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_name(name: str) -> bool:
    """A ``Host`` that names this machine from itself (``*.localhost`` too, RFC 6761)."""
    return name.endswith(".localhost") or is_loopback(name)


class Guard(BaseHTTPMiddleware):
    """What a request must be before it reaches the service: the token; a ``Host`` that names
    this service (a DNS-rebinding page names its own); for a change, no other site's
    ``Origin`` and a JSON body (a plain HTML form or a "simple" cross-site fetch can send
    neither); the body limit; and one line instead of a traceback."""

    def __init__(self, app: Any, token: str | None, host: str, settings: ServeSettings) -> None:
        super().__init__(app)
        self.token = token
        self.bound = host_name(host)
        self.allowed_hosts = {name.lower() for name in settings.allowed_hosts}
        self.origins = set(settings.cors_origins)

    def refusal(self, request: Request) -> JSONResponse | None:
        name = host_name(request.headers.get("host", ""))
        if not self.host_allowed(name):
            return error(
                421, f"Host '{name}' is not this service's: add it to [serve] allowed_hosts"
            )
        if self.token is not None and not is_public(request.url.path):
            given = request.headers.get("authorization", "")
            header_ok = hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())
            if not (header_ok or self.media_cookie(request, self.token)):
                return error(401, "unauthorized")
        if request.method not in STATE_CHANGING:
            return None
        origin = request.headers.get("origin")
        site = request.headers.get("sec-fetch-site", "")
        same = origin is not None and urlsplit(origin).netloc == request.headers.get("host")
        if origin not in self.origins and (
            (origin is not None and not same) or site in ("cross-site", "same-site")
        ):
            return error(
                403,
                f"cross-site request refused: Origin {origin or site} "
                "(add the page's origin to [serve] cors_origins)",
            )
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return error(413, f"request body over {MAX_BODY} bytes")
        has_body = (length is not None and length != "0") or "transfer-encoding" in request.headers
        if has_body:
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return error(415, f"expected Content-Type: application/json, got '{kind}'")
        return None

    @staticmethod
    def media_cookie(request: Request, token: str) -> bool:
        """An ``<img>`` or ``<video>`` cannot send a header: reading ``/media/`` files, the
        page's cookie (SameSite=Strict: no other site's page sends it) stands for the token."""
        if request.method not in ("GET", "HEAD") or not request.url.path.startswith("/media/"):
            return False
        given = unquote(request.cookies.get(MEDIA_COOKIE, ""))  # the page encodes it
        return hmac.compare_digest(given.encode(), token.encode())

    def host_allowed(self, name: str) -> bool:
        if "*" in self.allowed_hosts or name in self.allowed_hosts or is_loopback_name(name):
            return True
        # Listening on every address: reached by any of the machine's names (a token is
        # required there, which no rebinding page has).
        return self.bound in WILDCARDS or name == self.bound

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        refused = self.refusal(request)
        if refused is not None:
            return refused
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
    except RecursionError:
        raise StreamError(400, "the body is not JSON this service reads: nested too deep") from None


def make_app(service: Streams, token: str | None = None, host: str = "127.0.0.1") -> Starlette:
    """The app of ``service``, which listens on ``host`` (its Host header check)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(ServiceCollector(service))
    settings = service.settings
    stopping = service.stopping

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)  # no icon; public, so no client is asked a token

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

    async def live(request: Request) -> Response:
        """The stream's live video as fragmented MP4 (H.264), for Media Source Extensions or
        any player that reads a growing MP4 (ffplay, PyAV)."""
        stream = await anyio.to_thread.run_sync(service.live_stream, request.path_params["id"])
        viewer = stream.watch_mp4()
        header = await anyio.to_thread.run_sync(stream.header, LIVE_START_S)
        if header is None:
            stream.leave(viewer)
            return error(503, "no picture to stream yet")

        async def body() -> AsyncIterator[bytes]:
            try:
                yield header
                while not stopping.is_set() and not viewer.closed:
                    data = await anyio.to_thread.run_sync(viewer.get, 0.5)
                    if data is not None:
                        yield data
            finally:
                stream.leave(viewer)

        headers = {
            "Cache-Control": "no-store",
            "X-Live-Epoch": f"{stream.epoch:.6f}",
            "X-Live-Codec": stream.codec_string(),
        }
        return StreamingResponse(body(), media_type="video/mp4", headers=headers)

    async def page(request: Request) -> Response:
        name = PAGE_FILES[request.url.path]
        text = resources.files("vapipe.serve").joinpath("web", name).read_text("utf-8")
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
        Route("/favicon.ico", favicon),
        Route("/readyz", readyz),
        Route("/api/streams", list_streams, methods=["GET"]),
        Route("/api/streams", add_stream, methods=["POST"]),
        Route("/api/streams/{id}", one_stream, methods=["GET"]),
        Route("/api/streams/{id}", remove_stream, methods=["DELETE"]),
        Route("/api/streams/{id}/analytics", get_analytics, methods=["GET"]),
        Route("/api/streams/{id}/analytics", put_analytics, methods=["PUT"]),
        Route("/api/config", config),
        Route("/api/events", events),
        *history_routes(service.graph),
        Route("/metrics", metrics),
        Route("/streams/{id}/snapshot.jpg", snapshot),
        Route("/streams/{id}/mjpeg", mjpeg),
        Route("/streams/{id}/live.mp4", live),
    ]
    middleware = [Middleware(Guard, token=token, host=host, settings=settings)]
    if settings.cors_origins:  # outermost: it answers the preflights, which carry no token
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=settings.cors_origins,
                allow_methods=["GET", "POST", "PUT", "DELETE"],
                allow_headers=["Authorization", "Content-Type"],
            ),
        )
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={StreamError: stream_error, 404: not_found, 405: not_allowed},
    )
