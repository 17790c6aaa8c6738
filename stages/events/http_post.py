"""One HTTP(S) endpoint that events are POSTed to: the connection kept open between POSTs,
redirects never followed (credentials and headers must not go to another host), and the whole
exchange cut at ``timeout_s``, however slowly the server trickles its answer."""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

RETRYABLE = frozenset({408, 425, 429})
"""Client errors worth retrying (timeout, too early, too many requests); 5xx are too."""


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after_s: float | None
    location: str | None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def permanent(self) -> bool:
        """A refusal that sending the same batch again will not change."""
        return not self.ok and self.status < 500 and self.status not in RETRYABLE


class ExchangeTimeout(OSError):
    """The server did not answer in full within the time allowed."""


class Endpoint:
    def __init__(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme.lower() == "https"
        self.host = parts.hostname or ""
        self.port = parts.port
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = headers
        self.timeout_s = timeout_s
        self._connection: http.client.HTTPConnection | None = None
        self.connections = 0
        """Connections opened: far fewer than POSTs while the server keeps them alive."""

    def post(self, body: bytes) -> Answer:
        """POST ``body``; raises OSError or http.client.HTTPException if no answer came."""
        reused = self._connection is not None
        try:
            return self._exchange(body)
        except (ConnectionError, http.client.RemoteDisconnected):
            if not reused:
                raise
            # The server closed the idle connection we kept: once more on a new one.
            return self._exchange(body)

    def _exchange(self, body: bytes) -> Answer:
        connection = self._connect()
        cut = threading.Event()
        timer = threading.Timer(self.timeout_s, self._cut, args=(connection, cut))
        timer.daemon = True
        timer.start()
        try:
            connection.request("POST", self.target, body, self.headers)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            if cut.is_set():
                raise ExchangeTimeout(f"no complete answer within {self.timeout_s:g} s") from None
            raise exc
        finally:
            timer.cancel()
        if response.will_close:
            self.close()
        return Answer(
            response.status,
            retry_after(response.getheader("Retry-After")),
            response.getheader("Location"),
        )

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self.https:
                self._connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout_s,
                    context=ssl.create_default_context(),
                )  # fmt: skip
            else:
                self._connection = http.client.HTTPConnection(
                    self.host, self.port, timeout=self.timeout_s
                )
            self.connections += 1
        return self._connection

    @staticmethod
    def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
        cut.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # closed meanwhile
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
