"""SIGINT and SIGTERM at any moment, from the first import to the last frame: the process
ends within 5 s with 130, no traceback, whole JSON lines, and a playable video whose
duration covers what the events say was written."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import FILE_CONFIG, probe_video

_RNG = random.Random(7)
# Two in the first half second (imports, config), the rest anywhere in the first 4 s (model
# loading, stages opening, frames flowing); SIGINT and SIGTERM in turn.
MOMENTS = [0.05, 0.3, *sorted(round(_RNG.uniform(0.5, 4.0), 2) for _ in range(8))]
CASES = [
    (moment, signal.SIGINT if index % 2 == 0 else signal.SIGTERM)
    for index, moment in enumerate(MOMENTS)
]


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


@pytest.mark.parametrize(("moment", "signum"), CASES, ids=[f"{m:.2f}s-{s.name}" for m, s in CASES])
def test_a_signal_at_any_moment_ends_cleanly(tmp_path: Path, moment: float, signum: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "vapipe", str(FILE_CONFIG), "--set", "cam.loop=true"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # CPython's own start-up (before any of our code runs) answers Ctrl-C itself; "any moment"
    # starts when our code does: from when numpy, the first extension we import, is mapped.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "_multiarray_umath" not in _maps(process.pid):
        time.sleep(0.005)
    time.sleep(moment)
    process.send_signal(signum)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()  # a looping run left behind would eat the cores of every later test
        process.communicate()
        pytest.fail(f"still running 60 s after {signal.Signals(signum).name}")
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    events = tmp_path / "out/events.jsonl"
    lines = events.read_text().splitlines() if events.exists() else []
    assert all(json.loads(line)["event"] == "frame" for line in lines)
    assert not events.exists() or events.read_text() in ("", events.read_text().rstrip("\n") + "\n")
    video = tmp_path / "out/annotated.mp4"
    if lines:  # frames reached the sinks: the video holds them all
        got = probe_video(video)
        assert got["frames"] == len(lines)
        assert got["duration"] >= len(lines) / (24000 / 1001) - 2.0
    assert not (tmp_path / "out/annotated.partial.mp4").exists()
