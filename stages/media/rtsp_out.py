"""The live streams served over RTSP: GStreamer's RTSP server in a child process of the
system's Python (``rtsp_gst.py``), fed the access units the streams encoded, through a queue
that never makes the pipeline wait."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vapipe.pipeline.errors import PipelineError

log = logging.getLogger(__name__)

HELPER = Path(__file__).with_name("rtsp_gst.py")
HEADER = struct.Struct(">BHI")
ANNOUNCE = 2
"""The first byte of a header that adds a mount (rtsp_gst.py)."""
"""Each unit's header to the server process: keyframe, mount name length, data length."""
PROBE = (
    "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer"
)
INSTALL_HINT = (
    "GStreamer's RTSP server for the system Python is missing (Debian/Ubuntu: apt install "
    "python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-bad)"
)
START_TIMEOUT_S = 30.0
QUEUED_MOST = 256
"""Access units waiting for the server process; past that, units are dropped (each stream
then skips to its next keyframe)."""


def gst_python(wanted: str | None = None) -> str | None:
    """A Python that imports GStreamer's RTSP server: ``wanted``, else $VAPIPE_GST_PYTHON, else
    /usr/bin/python3, else python3 on the PATH; None where none does."""
    candidates = [wanted] if wanted else [
        os.environ.get("VAPIPE_GST_PYTHON"), "/usr/bin/python3", shutil.which("python3"),
    ]  # fmt: skip
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        try:
            probe = subprocess.run(
                [candidate, "-c", PROBE], capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return candidate
    return None


@dataclass(frozen=True)
class RtspSettings:
    host: str
    port: int
    login: str | None = None
    """``user:password`` a client must give (basic authentication), None for none."""
    python: str | None = None


class RtspServer:
    """The server process, the mounts' viewer counts, and the feed."""

    def __init__(
        self,
        settings: RtspSettings,
        mounts: list[str],
        wants_keyframe: Callable[[str], None] = lambda mount: None,
    ) -> None:
        python = gst_python(settings.python)
        if python is None:
            raise PipelineError(f"RTSP: {INSTALL_HINT}")
        env = {**os.environ}
        env.pop("VAPIPE_RTSP_LOGIN", None)
        if settings.login:
            env["VAPIPE_RTSP_LOGIN"] = settings.login  # not on the command line: ps shows that
        self.process = subprocess.Popen(
            [python, str(HELPER), settings.host, str(settings.port), *mounts],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        self.watchers: dict[str, int] = dict.fromkeys(mounts, 0)
        """Mount -> its clients now (the server process says when they change)."""
        self.wants_keyframe = wants_keyframe
        self.port = self._wait_ready(settings)
        self.feed: queue.Queue[bytes | None] = queue.Queue(QUEUED_MOST)
        self.dropped = 0
        self._lines = threading.Thread(target=self._read_lines, name="rtsp-lines", daemon=True)
        self._lines.start()
        self._writer = threading.Thread(target=self._write, name="rtsp-feed", daemon=True)
        self._writer.start()

    def _wait_ready(self, settings: RtspSettings) -> int:
        stdout = self.process.stdout
        assert stdout is not None
        result: list[str] = []
        reader = threading.Thread(
            target=lambda: result.append(stdout.readline().decode()), daemon=True
        )
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = result[0].strip() if result else ""
        if not line.startswith("ready "):
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            why = err.decode(errors="replace").strip().splitlines()
            raise PipelineError(
                f"RTSP server on {settings.host}:{settings.port} did not start: "
                + (why[-1] if why else "no answer")
            )
        return int(line.split()[1])

    def _read_lines(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            words = raw.decode(errors="replace").split()
            if len(words) == 3 and words[0] == "watch" and words[1] in self.watchers:
                self.watchers[words[1]] = int(words[2])
                log.info("RTSP /%s: %s viewer(s)", words[1], words[2])
            elif len(words) == 2 and words[0] == "key" and words[1] in self.watchers:
                self.wants_keyframe(words[1])

    def add_mount(self, mount: str) -> None:
        """Serves ``mount`` too (a stream added to a running service); at once if new."""
        if mount in self.watchers:
            return
        self.watchers[mount] = 0
        name = mount.encode()
        try:
            self.feed.put(HEADER.pack(ANNOUNCE, len(name), 0) + name, timeout=5)
        except queue.Full:
            log.warning("RTSP: /%s could not be added (the server process is behind)", mount)

    def send(self, mount: str, data: bytes, keyframe: bool) -> None:
        """Queues one access unit (never waits: dropped when the server process is behind)."""
        if not self.watchers.get(mount):
            return
        name = mount.encode()
        header = HEADER.pack(int(keyframe), len(name), len(data))
        try:
            self.feed.put_nowait(header + name + data)
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        pipe = self.process.stdin
        assert pipe is not None
        while True:
            item = self.feed.get()
            if item is None:
                break
            try:
                pipe.write(item)
                pipe.flush()
            except (BrokenPipeError, OSError, ValueError):
                log.warning("RTSP server process ended (exit %s)", self.process.poll())
                break

    def close(self) -> None:
        with contextlib.suppress(queue.Full):
            self.feed.put(None, timeout=5)
        self._writer.join(timeout=5)
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
