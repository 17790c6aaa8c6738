"""Run the real CLI in a subprocess and read what it wrote."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import pytest

from tests.events_schema import assert_valid_events

REPO = Path(__file__).resolve().parents[2]
FILE_CONFIG = REPO / "configs" / "file.toml"


def cli(
    *args: str, cwd: Path, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI to completion. One that hangs is failed with every thread's stack (SIGUSR1
    makes the CLI print them), so a hang seen once in CI says where it was stuck."""
    process = subprocess.Popen(
        [sys.executable, "-m", "vapipe", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        time.sleep(2)
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"run-pipeline {' '.join(args)} hung for {timeout:.0f} s:\n{stderr[-6000:]}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def spawn(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """The CLI running in the background (stderr captured), for tests that signal it."""
    return subprocess.Popen(
        [sys.executable, "-m", "vapipe", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    log: list[str] | Path | None = None,
) -> None:
    """Wait for ``predicate``; a failure shows the last lines of ``log`` (a run's stderr, or
    the file it goes to, read then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    if isinstance(log, Path):  # all of it, a last line without its newline too
        log = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
    tail = "\n" + "".join(f"{line.rstrip()}\n" for line in log[-40:]) if log else ""
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def read_lines(path: Path) -> list[str]:
    """The whole lines of a file another process may be writing: a line is whole once its
    newline is there (the last one may be half written as it is read)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    return text[: text.rfind("\n") + 1].splitlines()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines file, each checked against docs/events.schema.json."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert_valid_events(events)
    return events


def probe_video(path: Path) -> dict[str, Any]:
    """Decode every frame: count, size, and the duration from the frame timestamps."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate
        frames = list(container.decode(stream))
        last = frames[-1]
        return {
            "frames": len(frames),
            "width": frames[0].width,
            "height": frames[0].height,
            "rate": rate,
            "duration": float(last.pts * last.time_base) + 1 / float(rate),
            "container_duration": container.duration / 1e6 if container.duration else None,
        }


def make_clip(path: Path, frames: int, width: int = 160, height: int = 120, rate: int = 25) -> Path:
    """An H.264 clip of a bright bar moving across a dark frame, made with PyAV."""
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = (
            width - width % 2,
            height - height % 2,
            "yuv420p",
        )
        stream.options = {"g": "10"}
        for index in range(frames):
            image = np.full((height, width, 3), 30, np.uint8)
            left = (index * 4) % max(width - 20, 1)
            image[:, left : left + 20] = 220
            picture = av.VideoFrame.from_ndarray(image, format="bgr24")
            for packet in stream.encode(picture.reformat(stream.width, stream.height)):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def capture_s(event: dict[str, Any]) -> float:
    """An event's wall-clock time (its ISO-8601 ``time``) in seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def unloadable_model(path: Path) -> Path:
    """An ONNX file that parses but no runtime loads (an operator of a domain none has): the
    model fails as the run starts, not when the config is read."""
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 64, 64])
    node = helper.make_node("NoSuchOperator", ["images"], ["out"], domain="org.nowhere")
    graph = helper.make_graph([node], "g", [image], [out])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("org.nowhere", 1)],
    )
    model.ir_version = 8
    onnx.save(model, path)
    return path
