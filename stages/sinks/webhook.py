"""The ``webhook`` sink: events POSTed as JSON arrays to an HTTP endpoint, in batches.

As with the mqtt sink, ``process`` only puts records into a bounded outbox; a sender thread
POSTs up to ``batch_size`` of them at a time over one kept-alive connection, retrying a
failed batch with exponential backoff (or as long as the server's ``Retry-After`` says, up to
``retry_max_s``), so a
slow or dead server never holds up the video path. A batch the server refuses for good (a
4xx other than 408/425/429, or a redirect, which is never followed) is dropped and counted.
"""

from __future__ import annotations

import base64
import http.client
import logging
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import Field, field_validator

from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.pipeline.urls import hidden_parts, mask_also, mask_credentials, shown_url
from vapipe.stages.events.http_post import Answer, Endpoint
from vapipe.stages.events.outbox import Reachability
from vapipe.stages.events.records import NonFinite, Record, to_json
from vapipe.stages.sinks.outbox_sink import OutboxConfig, OutboxSink

log = logging.getLogger(__name__)


class WebhookConfig(OutboxConfig):
    """The endpoint, batching, retries and the outbox."""

    url: str
    """``http://`` or ``https://`` endpoint; user:password in it is sent as basic auth and
    masked everywhere. Logs and stats show its scheme, host and port only (Slack, Discord and
    Home Assistant webhook URLs hold their secret in the path) unless ``show_url_path``."""
    show_url_path: bool = False
    """Show the URL's path and query in logs and stats: for a URL that holds no secret."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers (``{ Authorization = "Bearer ..." }``); values are never logged."""
    batch_size: int = Field(50, ge=1, le=10000)
    """Events per POST at most (the body is a JSON array)."""
    batch_wait_s: float = Field(0.5, ge=0)
    """After the first event of a batch, how long to wait for more before sending."""
    timeout_s: float = Field(5.0, gt=0)
    """Give up one POST after this long, connecting, sending and the whole answer together
    (then retry)."""
    retry_initial_s: float = Field(0.5, gt=0)
    """Wait before the first retry of a failed batch; doubles up to ``retry_max_s``."""
    retry_max_s: float = Field(30.0, gt=0)
    """Longest wait between retries, a server's Retry-After included (one asking for an hour
    would hold every event that long); a batch is retried until delivered or the run ends."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError(f"expected an http:// or https:// URL, got {mask_credentials(url)}")
        if not parts.hostname:
            raise ValueError(f"no host in {mask_credentials(url)}")
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError as exc:
            raise ValueError(f"{mask_credentials(url)}: {exc}") from None
        return url

    @field_validator("headers")
    @classmethod
    def _one_line_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not name or any(c in name for c in ":\r\n\0 ") or any(c in value for c in "\r\n\0"):
                # The value is a secret as often as not: named, never shown.
                raise ValueError(
                    f"header {name!r}: names and values must be one line "
                    "(no line breaks or NUL; no ':' or spaces in the name)"
                )
        return headers


@register("webhook")
class WebhookSink(OutboxSink):
    """POSTs events as JSON arrays to a URL, in batches, with retries, never blocking."""

    Config = WebhookConfig
    config: WebhookConfig
    endpoint: Endpoint
    shown_url: str | None = None
    posts = delivered = failures = rejected = 0
    non_finite: NonFinite | None = None

    def open(self, context: StageContext) -> None:
        cfg = self.config
        url, headers = _request_for(cfg)
        self.endpoint = Endpoint(url, headers, cfg.timeout_s)
        self.shown_url = shown_url(cfg.url, cfg.show_url_path)
        # Said by no log line or stats: what follows the host, unless the config says it may.
        self._hidden = () if cfg.show_url_path else hidden_parts(cfg.url)
        self.reach = Reachability(self.name, self.shown_url)
        self.posts = self.delivered = self.failures = self.rejected = 0
        self.non_finite = NonFinite(self.name)
        self._refusals: set[int] = set()
        self._closing = threading.Event()
        self._deadline = float("inf")
        self._sender = threading.Thread(target=self._send, name=f"{self.name}-send", daemon=True)
        self._sender.start()
        log.info("%s: posting events to %s", self.name, self.shown_url)

    def _send(self) -> None:
        cfg = self.config
        try:
            while not (self._closing.is_set() and (not len(self.outbox) or self._time_up())):
                batch = self.outbox.take(cfg.batch_size, wait_s=0.2, fill_s=cfg.batch_wait_s)
                wait = cfg.retry_initial_s
                while batch:
                    answer = self._post(batch)
                    if answer is not None and (answer.ok or answer.permanent):
                        break
                    if self._time_up():
                        self.outbox.give_back(batch)  # undelivered at the end: in the stats
                        return
                    pause = (
                        wait
                        if answer is None or answer.retry_after_s is None
                        else min(answer.retry_after_s, cfg.retry_max_s)
                    )
                    if self._closing.is_set():
                        time.sleep(max(0.0, min(pause, self._deadline - time.monotonic())))
                    else:
                        self._closing.wait(pause)  # the run ending cuts a long wait short
                    wait = min(wait * 2, cfg.retry_max_s)
        finally:
            self.endpoint.close()

    def _time_up(self) -> bool:
        return self._closing.is_set() and time.monotonic() >= self._deadline

    def prepare(self, record: Record) -> str:
        """The record's JSON, made once however often its batch is posted again."""
        return to_json(record, self.non_finite)

    def _post(self, batch: list[str]) -> Answer | None:
        """One attempt; the answer, or None when none came."""
        body = ("[" + ",".join(batch) + "]").encode()
        try:
            answer = self.endpoint.post(body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._failed(str(exc) or type(exc).__name__, batch)
            return None
        if answer.ok:
            self.reach.reachable()
            self.posts += 1
            self.delivered += len(batch)
        elif answer.permanent:
            self.reach.reachable()  # it answered: the batch is refused, not the server down
            self.rejected += len(batch)
            if answer.status not in self._refusals:
                self._refusals.add(answer.status)
                log.warning(
                    "%s: %s refused a batch with HTTP %d%s; its %d events are dropped "
                    "(and later batches refused so, counted in the stats)",
                    self.name,
                    self.shown_url,
                    answer.status,
                    " (redirects are never followed)" if 300 <= answer.status < 400 else "",
                    len(batch),
                )
        else:
            self._failed(f"HTTP {answer.status}", batch)
        return answer

    def _failed(self, reason: str, batch: list[str]) -> None:
        self.failures += 1
        waiting = len(batch) + len(self.outbox)
        reason = mask_also(reason, self._hidden)
        log.info(
            "%s: POST to %s failed (%s); %d events wait for a retry",
            self.name, self.shown_url, reason, waiting,
        )  # fmt: skip
        self.reach.failing(reason, waiting)

    def close(self) -> None:
        if self._sender is None:
            return
        self._deadline = time.monotonic() + self.config.drain_s
        self.outbox.wait_empty(self.config.drain_s)
        self._closing.set()
        self.outbox.close()
        self._sender.join(max(self._deadline - time.monotonic(), 0) + self.config.timeout_s + 1)
        if len(self.outbox):
            log.warning(
                "%s: %d events not delivered to %s by the end of the run",
                self.name,
                len(self.outbox),
                self.shown_url,
            )

    def stats(self) -> dict[str, Any]:
        outbox = self.outbox
        endpoint = self.endpoint if self._sender is not None else None
        return {
            "url": self.shown_url,
            "posts": self.posts,
            "delivered": self.delivered,
            "failed_posts": self.failures,
            "rejected": self.rejected,
            "dropped": outbox.dropped,
            "undelivered": len(outbox),
            "non_finite": self.non_finite.count if self.non_finite else 0,
            "connections": endpoint.connections if endpoint is not None else 0,
        }


def _request_for(cfg: WebhookConfig) -> tuple[str, dict[str, str]]:
    """The POST's URL and headers; user:password from the URL becomes basic auth."""
    parts = urlsplit(cfg.url)
    headers = {"Content-Type": "application/json", "User-Agent": "vapipe", **cfg.headers}
    url = cfg.url
    if parts.username is not None:
        token = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url, headers
