"""The webhook sink against servers that misbehave on purpose (raw sockets on loopback): no
answer that is not HTTP, a trickled answer, refusals, Retry-After, redirects, kept-alive
connections. Nothing kills its sender thread, and every event is delivered, refused, dropped
or counted undelivered."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vapipe.pipeline import config
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.events.outbox import Outbox, Reachability
from vapipe.stages.sinks.webhook import WebhookConfig, WebhookSink

Handler = Callable[[socket.socket, int], None]
"""Serves one connection: the socket and the number of the request being answered."""


class RawServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader = conn.makefile("rb")
            while not self._stop.is_set():
                request = read_request(reader)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    number = len(self.requests)
                try:
                    self.handler(conn, number)
                except OSError:
                    return

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


def read_request(reader: Any) -> tuple[str, dict[str, str], bytes] | None:
    line = reader.readline()
    if not line:
        return None
    headers = {}
    while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = reader.read(int(headers.get("content-length", 0)))
    return line.decode().strip(), headers, body


def answer(status: int, extra: str = "", close: bool = False) -> bytes:
    connection = "Connection: close\r\n" if close else ""
    return f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n{connection}{extra}\r\n".encode()


@contextlib.contextmanager
def serving(handler: Handler) -> Iterator[RawServer]:
    server = RawServer(handler)
    try:
        yield server
    finally:
        server.close()


def run_sink(url: str, events: int, answered: bool = True, **settings: Any) -> WebhookSink:
    """A sink opened on ``url``, given ``events`` events, closed (drained); with
    ``answered``, closed once every event was delivered or refused."""
    config = WebhookConfig(url=url, **{"batch_wait_s": 0, "drain_s": 3, **settings})
    sink = WebhookSink("hook", config)
    sink.open(None)  # type: ignore[arg-type]
    for seq in range(events):
        sink.accept({"event": "frame", "source_id": "cam", "seq": seq, "pts": seq / 25})
    # While the run goes on (closing cuts waits short), until every event is answered for.
    deadline = time.monotonic() + 10
    while answered and sink.delivered + sink.rejected < events and time.monotonic() < deadline:
        time.sleep(0.01)
    sink.close()
    return sink


def test_garbage_instead_of_http_is_a_failed_attempt_not_a_dead_thread() -> None:
    def handler(conn: socket.socket, number: int) -> None:
        if number == 1:
            conn.sendall(b"\x00\x01garbage that is not HTTP\r\n\r\n")
            conn.close()
        else:
            conn.sendall(answer(204))

    with serving(handler) as server:
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 5, retry_initial_s=0.05)
    stats = sink.stats()
    assert stats["failed_posts"] == 1 and stats["delivered"] == 5, stats
    assert stats["undelivered"] == 0


def test_an_answer_trickled_forever_is_cut_at_timeout_s_for_the_whole_exchange() -> None:
    cut = threading.Event()

    def handler(conn: socket.socket, number: int) -> None:
        # One byte of the status line every 0.2 s: each read succeeds, the answer never ends.
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 1000:
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                cut.set()
                return
            time.sleep(0.2)

    with serving(handler) as server:
        sink = run_sink(
            f"http://127.0.0.1:{server.port}/e", 3, answered=False, timeout_s=1, drain_s=1
        )
    assert cut.wait(5), "the sink never hung up on the trickling server"
    stats = sink.stats()
    assert stats["delivered"] == 0 and stats["failed_posts"] >= 1
    assert stats["undelivered"] == 3, stats


@pytest.mark.parametrize("status", [400, 401, 404, 413, 302])
def test_a_permanent_refusal_is_dropped_and_counted_not_retried(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(conn: socket.socket, number: int) -> None:
        conn.sendall(answer(status, "Location: http://127.0.0.2:1/elsewhere\r\n"))

    with serving(handler) as server, caplog.at_level(logging.WARNING):
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 6, batch_size=2)
    stats = sink.stats()
    # Three batches, each tried once: none retried, none left waiting.
    assert len(server.requests) == 3 and stats["rejected"] == 6, stats
    assert stats["failed_posts"] == 0 and stats["undelivered"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"HTTP {status}" in warnings[0], warnings


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_a_passing_refusal_is_retried_as_long_as_retry_after_says(status: int) -> None:
    times: list[float] = []

    def handler(conn: socket.socket, number: int) -> None:
        times.append(time.monotonic())
        conn.sendall(answer(status, "Retry-After: 1\r\n") if number == 1 else answer(200))

    with serving(handler) as server:
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 4, retry_initial_s=0.01)
    stats = sink.stats()
    assert stats["delivered"] == 4 and stats["failed_posts"] == 1, stats
    assert times[1] - times[0] >= 0.95, "Retry-After: 1 was not honoured"


def test_a_retry_after_longer_than_retry_max_s_waits_retry_max_s() -> None:
    def handler(conn: socket.socket, number: int) -> None:
        conn.sendall(answer(503, "Retry-After: 3600\r\n") if number == 1 else answer(200))

    config = WebhookConfig(url="http://127.0.0.1:1/e", batch_wait_s=0, retry_max_s=0.05)
    with serving(handler) as server:
        config = config.model_copy(update={"url": f"http://127.0.0.1:{server.port}/e"})
        sink = WebhookSink("hook", config)
        sink.open(None)  # type: ignore[arg-type]
        sink.accept({"event": "frame", "source_id": "cam", "seq": 0, "pts": 0.0})
        deadline = time.monotonic() + 60
        while sink.delivered < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        delivered_while_running = sink.delivered  # not at close, which cuts waits short
        sink.close()
    assert delivered_while_running == 1 and len(server.requests) == 2


def test_percent_encoded_credentials_are_decoded_for_basic_auth() -> None:
    import base64

    with serving(lambda conn, number: conn.sendall(answer(204))) as server:
        run_sink(f"http://us%40er:p%3Ass%2F1@127.0.0.1:{server.port}/e", 1)
    ((_, headers, _),) = server.requests
    scheme, _, token = headers["authorization"].partition(" ")
    assert scheme == "Basic" and base64.b64decode(token).decode() == "us@er:p:ss/1"


SLACK = "/services/T0001/B0002/XyZsecretTOKEN"


def test_a_webhook_url_path_is_never_shown_unless_declared_safe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="vapipe.stages.sinks.webhook"):
        sink = run_sink(f"http://127.0.0.1:1{SLACK}?t=2", 1, answered=False, drain_s=0.1)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "posting events to http://127.0.0.1:1/***" in said
    assert "POST to http://127.0.0.1:1/*** failed" in said, said
    assert sink.stats()["url"] == "http://127.0.0.1:1/***"
    assert "XyZsecretTOKEN" not in said + str(sink.stats()) and "T0001" not in said
    shown = run_sink(f"http://127.0.0.1:1{SLACK}", 0, show_url_path=True)
    assert shown.stats()["url"] == f"http://127.0.0.1:1{SLACK}"
    plain = run_sink("http://127.0.0.1:1", 0)
    assert plain.stats()["url"] == "http://127.0.0.1:1"


def test_credentials_never_follow_a_redirect() -> None:
    elsewhere: list[dict[str, str]] = []

    def other_host(conn: socket.socket, number: int) -> None:
        elsewhere.append(server_b.requests[-1][1])
        conn.sendall(answer(204))

    with serving(other_host) as server_b:

        def redirecting(conn: socket.socket, number: int) -> None:
            conn.sendall(answer(307, f"Location: http://localhost:{server_b.port}/steal\r\n"))

        with serving(redirecting) as server_a:
            sink = run_sink(
                f"http://user:pw-secret@127.0.0.1:{server_a.port}/e",
                2,
                headers={"X-Api-Key": "k-secret"},
            )
    assert elsewhere == [] and server_b.connections == 0
    assert sink.stats()["rejected"] == 2
    (request,) = server_a.requests
    assert request[1]["x-api-key"] == "k-secret" and request[1]["authorization"].startswith("Basic")


def test_one_connection_serves_every_batch_while_the_server_keeps_it_alive() -> None:
    with serving(lambda conn, number: conn.sendall(answer(204))) as server:
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 40, batch_size=4)
    assert len(server.requests) == 10 and server.connections == 1
    assert sink.stats()["connections"] == 1 and sink.stats()["delivered"] == 40


def test_a_server_that_says_connection_close_gets_a_new_connection_each_time() -> None:
    with serving(lambda conn, number: conn.sendall(answer(204, close=number % 2 == 1))) as server:
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 12, batch_size=3)
    stats = sink.stats()
    assert stats["delivered"] == 12 and stats["failed_posts"] == 0, stats
    assert server.connections == stats["connections"] == 3, "a closing answer was kept open"


def test_a_closed_kept_alive_connection_is_reopened_without_a_failed_attempt() -> None:
    # The server keeps each connection alive (no "Connection: close") and then drops it
    # after every first answer, as an idle timeout does: the sink's next POST on it finds
    # it gone, and sends once more on a new connection instead of counting a failure.
    def handler(conn: socket.socket, number: int) -> None:
        conn.sendall(answer(204))
        if number % 2 == 1:
            conn.shutdown(socket.SHUT_RDWR)

    with serving(handler) as server:
        sink = run_sink(f"http://127.0.0.1:{server.port}/e", 12, batch_size=3)
    stats = sink.stats()
    assert stats["delivered"] == 12 and stats["failed_posts"] == 0, stats
    assert stats["posts"] == 4 and stats["connections"] >= 3, stats


HOOK = """\
links = ["cam ! hook"]
[nodes.cam]
type = "source"
uri = "x.mp4"
[nodes.hook]
type = "webhook"
url = "http://127.0.0.1:1/e"
"""


@pytest.mark.parametrize(
    ("setting", "secret"),
    [
        ('headers = { Authorization = "Bearer abc-secret\\n" }', "abc-secret"),
        ('headers = { X-Key = "a-secret\\r\\nInjected: 1" }', "a-secret"),
        ('headers = "Bearer str-secret"', "str-secret"),
        ('headers = { "Bad Name" = "v-secret" }', "v-secret"),
    ],
)
def test_header_values_are_one_line_and_never_echoed(setting: str, secret: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.parse(HOOK + setting + "\n", "h.toml")
    message = str(caught.value)
    assert "node 'hook' key 'headers'" in message
    assert secret not in message and "\n" not in message


@pytest.mark.parametrize("url", ["http://", "ftp://host/x", "http://host:port/x", "host/x"])
def test_urls_without_an_http_host_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        WebhookConfig(url=url)


def test_reachability_warns_once_while_down_and_says_when_back(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    reach = Reachability("hook", "http://x", warn_after_s=5)
    with caplog.at_level(logging.INFO, logger="vapipe.stages.events.outbox"):
        for step in range(10):
            now[0] = 100.0 + step
            reach.failing("refused", waiting=step)
        reach.reachable()
        reach.reachable()
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (logging.WARNING, "hook: http://x unreachable for 5 s (refused); 5 events waiting"),
        (logging.INFO, "hook: http://x reachable again after 9.0 s"),
    ]
    assert reach.outages == 1


def test_outbox_drops_the_oldest_and_counts_them() -> None:
    outbox = Outbox(3)
    for item in range(5):
        outbox.put(item)
    assert outbox.take(10, wait_s=0) == [2, 3, 4]
    assert outbox.dropped == 2 and outbox.high_water == 3


class _RecordedWaits(threading.Event):
    """The sender's waits between attempts, recorded and not slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None and not self.is_set():
            self.waits.append(round(timeout, 3))
            return False
        return super().wait(timeout)


def test_the_backoff_grows_within_a_batch_and_starts_again_for_the_next() -> None:
    failing = {1, 2, 3, 5}  # batch 1 fails three times, batch 2 once

    def handler(conn: socket.socket, number: int) -> None:
        conn.sendall(answer(500 if number in failing else 204))

    with serving(handler) as server:
        config = WebhookConfig(
            url=f"http://127.0.0.1:{server.port}/e", batch_size=2, batch_wait_s=0,
            retry_initial_s=0.05, retry_max_s=10,
        )  # fmt: skip
        sink = WebhookSink("hook", config)
        sink.open(None)  # type: ignore[arg-type]
        recorded = _RecordedWaits()
        sink._closing = recorded
        for seq in range(2):  # the first batch: delivered after its retries...
            sink.accept({"event": "frame", "source_id": "cam", "seq": seq, "pts": 0.0})
        deadline = time.monotonic() + 10
        while sink.delivered < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        for seq in range(2, 4):  # ...then the second
            sink.accept({"event": "frame", "source_id": "cam", "seq": seq, "pts": 0.0})
        while sink.delivered < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        sink.close()
    assert sink.stats()["delivered"] == 4
    assert recorded.waits == [0.05, 0.1, 0.2, 0.05], recorded.waits
