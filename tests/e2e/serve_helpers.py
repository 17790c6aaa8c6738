"""``run-pipeline serve`` in a subprocess on a free loopback port, and a client for it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import FILE_CONFIG

SERVING = re.compile(r"serving .* on http://([0-9.]+):(\d+)")


class Served:
    def __init__(self, process: subprocess.Popen[str], token: str | None) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url: str | None = None
        self._ready = threading.Event()
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.headers = headers
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = SERVING.search(line)
            if found and self.url is None:
                self.url = f"http://{found.group(1)}:{found.group(2)}"
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float = 120) -> None:
        if not self._ready.wait(timeout) or self.url is None:
            self.process.kill()
            pytest.fail(f"serve did not start:\n{''.join(self.lines)[-3000:]}")

    def client(self, **kwargs: Any) -> httpx.Client:
        assert self.url is not None
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=120, **kwargs)

    def stop(self, timeout: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(2)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"serve did not stop:\n{''.join(self.lines)[-3000:]}")
        return -1


@contextmanager
def serve(
    cwd: Path,
    *overrides: str,
    config: Path = FILE_CONFIG,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    token: str | None = None,
) -> Iterator[Served]:
    command = [sys.executable, "-m", "vapipe", "serve", str(config), "--port", "0", *args]
    for override in overrides:
        command += ["--set", override]
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    served = Served(process, token)
    try:
        served.wait_ready()
        yield served
    finally:
        if process.poll() is None:
            served.stop()


def per_source_outputs() -> tuple[str, ...]:
    """The file config's own stream loops; every stream gets files of its own."""
    return ("cam.loop=true", "video.path=out/{source_id}.mp4", "events.path=out/{source_id}.jsonl")


class Events:
    """A live-events (SSE) reader in a thread of its own."""

    def __init__(self, served: Served, query: str = "") -> None:
        self.items: list[dict[str, Any]] = []
        self.arrived: list[float] = []  # time.monotonic() of each item
        self.comments: list[str] = []
        self._client = served.client()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(query,), daemon=True)
        self._thread.start()

    def _read(self, query: str) -> None:
        try:
            with self._client.stream("GET", f"/api/events{query}") as response:
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("data: "):
                        self.items.append(json.loads(line[6:]))
                        self.arrived.append(time.monotonic())
                    elif line.startswith(":"):
                        self.comments.append(line)
        except httpx.HTTPError:
            if not self._stop.is_set():  # closed by us: expected; else the test sees no items
                raise

    def wait(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(list(self.items)):
                return
            time.sleep(0.05)
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")

    def close(self) -> None:
        self._stop.set()
        self._client.close()
