"""Helpers for tests against a real RTSP server (tests/rtsp_server.py on Debian's GStreamer)."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[1] / "rtsp_server.py"
SYSTEM_PYTHON = "/usr/bin/python3"


def free_port() -> int:
    """A port nothing listens on now: for tests that need a refused connection."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RtspServer:
    def __init__(self, clip: Path, port: int | None = None, login: str | None = None) -> None:
        self.clip, self.port = clip, port or 0  # 0: the server binds a free port itself
        self.login = login
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/stream"

    def start(self) -> RtspServer:
        check = subprocess.run(
            [
                SYSTEM_PYTHON,
                "-c",
                "import gi; gi.require_version("
                "'GstRtspServer', '1.0'); from gi.repository import GstRtspServer",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode != 0:
            pytest.fail(
                "the RTSP test server needs Debian's python3-gi and "
                "gir1.2-gst-rtsp-server-1.0 (see .ci/run): " + check.stderr[-300:]
            )
        self.process = subprocess.Popen(
            [SYSTEM_PYTHON, str(SERVER), str(self.port), str(self.clip)]
            + ([self.login] if self.login else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 15
        line = ""
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()  # type: ignore[union-attr]
            if line.startswith("ready") or not line:
                break
        if not line.startswith("ready"):
            self.kill()
            pytest.fail(f"RTSP server did not start: {self.process.stderr.read()[-500:]}")  # type: ignore[union-attr]
        self.port = int(line.split()[1])
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@contextlib.contextmanager
def rtsp_server(
    clip: Path, port: int | None = None, login: str | None = None
) -> Iterator[RtspServer]:
    server = RtspServer(clip, port, login).start()
    try:
        yield server
    finally:
        server.kill()


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never answers: its port."""
    with black_hole_watched() as (port, _):
        yield port


@contextlib.contextmanager
def black_hole_watched() -> Iterator[tuple[int, threading.Event]]:
    """A black hole, and an event set once it has accepted a connection."""
    accepted = threading.Event()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                held.append(conn)
                accepted.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()
