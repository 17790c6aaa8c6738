"""The webhook sink against a real local HTTP server: batched JSON arrays, every event in
order, failed POSTs retried, basic auth from the URL, credentials never shown."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.e2e.helpers import REPO, cli, read_events
from tests.events_schema import assert_valid_events

ANALYTICS = (REPO / "configs" / "analytics.toml").read_text(encoding="utf-8")


class Receiver:
    """Records each POST's JSON body and Authorization header; fails the first ``fail``."""

    def __init__(self, fail: int = 0) -> None:
        self.bodies: list[list[dict[str, Any]]] = []
        self.auth: list[str | None] = []
        self.fail = fail
        self.attempts = 0


@contextlib.contextmanager
def receiver(fail: int = 0) -> Iterator[tuple[Receiver, int]]:
    state = Receiver(fail)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.attempts += 1
            if state.attempts <= state.fail:
                self.send_response(500)
                self.end_headers()
                return
            state.bodies.append(json.loads(body))
            state.auth.append(self.headers.get("Authorization"))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def with_webhook(url: str, extra: str = "") -> str:
    text = ANALYTICS.replace('"analytics ! events"]', '"analytics ! events", "analytics ! hook"]')
    return text + f'\n[nodes.hook]\ntype = "webhook"\nurl = "{url}"\n{extra}'


def test_batches_arrive_in_order_after_retries_with_basic_auth(tmp_path: Path) -> None:
    secret = "hook-s3cret"
    with receiver(fail=2) as (state, port):
        config = tmp_path / "h.toml"
        config.write_text(
            with_webhook(
                f"http://user:{secret}@127.0.0.1:{port}/events",
                "batch_size = 20\nretry_initial_s = 0.1\n",
            )
        )
        result = cli(str(config), "--max-frames", "120", "--stats", "s.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    written = read_events(tmp_path / "out/analytics.jsonl")
    received = [event for body in state.bodies for event in body]
    assert_valid_events(received)
    assert received == written, "events lost, duplicated or reordered"
    assert all(1 <= len(body) <= 20 for body in state.bodies)
    assert len(state.bodies) >= len(written) / 20
    expected = "Basic " + base64.b64encode(f"user:{secret}".encode()).decode()
    assert set(state.auth) == {expected}
    stats_text = (tmp_path / "s.json").read_text()
    stats = json.loads(stats_text)["stages"]["hook"]
    assert stats["failed_posts"] == 2 and stats["delivered"] == len(written)
    assert stats["url"] == f"http://***@127.0.0.1:{port}/***"  # the path may be a secret
    assert "POST to http://***@127.0.0.1" in result.stderr
    for text in (result.stderr, stats_text):
        assert secret not in text


def test_filter_and_a_dead_server_never_block_the_run(tmp_path: Path) -> None:
    with receiver() as (_, port):
        pass  # the port is closed again: nothing listens there
    config = tmp_path / "h.toml"
    config.write_text(
        with_webhook(
            f"http://127.0.0.1:{port}/x",
            'event_types = ["zone_enter", "zone_exit"]\ndrain_s = 1\ntimeout_s = 1\n',
        )
    )
    result = cli(str(config), "--max-frames", "120", "--stats", "s.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    zone_events = [
        e for e in read_events(tmp_path / "out/analytics.jsonl") if e["event"].startswith("zone_")
    ]
    stats = json.loads((tmp_path / "s.json").read_text())["stages"]["hook"]
    assert stats["delivered"] == 0 and stats["failed_posts"] >= 1
    # Only the filtered types were queued: all of them are still there, undelivered.
    assert stats["undelivered"] == len(zone_events) > 0
    assert "events not delivered to http://127.0.0.1" in result.stderr
