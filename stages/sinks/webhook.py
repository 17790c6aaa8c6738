"""The ``webhook`` sink: events POSTed as JSON arrays to an HTTP endpoint, in batches.

As with the mqtt sink, ``process`` only puts records into a bounded outbox; a sender thread
POSTs up to ``batch_size`` of them at a time, retrying a failed batch with exponential
backoff, so a slow or dead server never holds up the video path.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import Field

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.sinks.outbox import Outbox, OutboxConfig, OutboxSink
from vapipe.stages.sinks.records import Record, to_json

log = logging.getLogger(__name__)


class WebhookConfig(OutboxConfig):
    """The endpoint, batching, retries and the outbox."""

    url: str
    """``http://`` or ``https://`` endpoint; user:password in it is sent as basic auth and
    masked everywhere."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers (``{ Authorization = "Bearer ..." }``); values are never logged."""
    batch_size: int = Field(50, ge=1, le=10000)
    """Events per POST at most (the body is a JSON array)."""
    batch_wait_s: float = Field(0.5, ge=0)
    """After the first event of a batch, how long to wait for more before sending."""
    timeout_s: float = Field(5.0, gt=0)
    """Give up one POST after this long (then retry)."""
    retry_initial_s: float = Field(0.5, gt=0)
    """Wait before the first retry of a failed batch; doubles up to ``retry_max_s``."""
    retry_max_s: float = Field(30.0, gt=0)
    """Longest wait between retries; a batch is retried until delivered or the run ends."""


@register("webhook")
class WebhookSink(OutboxSink):
    """POSTs events as JSON arrays to a URL, in batches, with retries, never blocking."""

    Config = WebhookConfig
    config: WebhookConfig

    def open(self, context: StageContext) -> None:
        cfg = self.config
        if not cfg.url.lower().startswith(("http://", "https://")):
            raise ConfigError(
                f"expected an http:// or https:// URL, got {mask_credentials(cfg.url)}", key="url"
            )
        self.request = _request_for(cfg)
        self.shown_url = mask_credentials(cfg.url)
        self.outbox = Outbox(cfg.outbox_size)
        self.posts = self.delivered = self.failures = 0
        self._closing = threading.Event()
        self._deadline = float("inf")
        self._sender = threading.Thread(target=self._send, name=f"{self.name}-send", daemon=True)
        self._sender.start()
        log.info("%s: posting events to %s", self.name, self.shown_url)

    def _send(self) -> None:
        cfg = self.config
        while not (self._closing.is_set() and (not len(self.outbox) or self._time_up())):
            batch = self.outbox.take(cfg.batch_size, wait_s=0.2, fill_s=cfg.batch_wait_s)
            wait = cfg.retry_initial_s
            while batch and not self._post(batch):
                if self._time_up():
                    self.outbox.give_back(batch)  # undelivered at the end: counted in stats
                    return
                if self._closing.is_set():
                    time.sleep(min(wait, self._deadline - time.monotonic()))
                else:
                    self._closing.wait(wait)  # the run ending cuts a long wait short
                wait = min(wait * 2, cfg.retry_max_s)

    def _time_up(self) -> bool:
        return self._closing.is_set() and time.monotonic() >= self._deadline

    def _post(self, batch: list[Record]) -> bool:
        body = ("[" + ",".join(to_json(record) for record in batch) + "]").encode()
        request = urllib.request.Request(self.request.full_url, body, dict(self.request.headers))
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                response.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.failures += 1
            reason = getattr(exc, "code", None) or getattr(exc, "reason", None) or exc
            log.warning(
                "%s: POST to %s failed (%s); %d events wait for a retry",
                self.name,
                self.shown_url,
                mask_credentials(str(reason)),
                len(batch) + len(self.outbox),
            )
            return False
        self.posts += 1
        self.delivered += len(batch)
        return True

    def close(self) -> None:
        if not hasattr(self, "outbox"):
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
        outbox = getattr(self, "outbox", None)
        return {
            "url": getattr(self, "shown_url", None),
            "posts": getattr(self, "posts", 0),
            "delivered": getattr(self, "delivered", 0),
            "failed_posts": getattr(self, "failures", 0),
            "dropped": outbox.dropped if outbox else 0,
            "undelivered": len(outbox) if outbox else 0,
        }


def _request_for(cfg: WebhookConfig) -> urllib.request.Request:
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
    return urllib.request.Request(url, headers=headers, method="POST")
