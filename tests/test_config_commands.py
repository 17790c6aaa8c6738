"""Every command written in a config's comments runs: each ``run-pipeline`` line (with its
``\\`` continuations and environment assignments) is run against real media and, for cameras
and the MQTT broker, against servers started here. Placeholders are filled in: ``my.mp4``
with a sample clip, ``rtsp://...`` with the test camera, ``broker.local`` with the test broker.
Each run stops after a few frames (cameras never end)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import asset
from tests.e2e.helpers import wait_for
from tests.e2e.mqtt import broker
from tests.e2e.rtsp import rtsp_server
from tests.e2e.serve_helpers import serve
from tests.object_models import brightness_classifier

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def commented_commands(config: Path) -> list[str]:
    """The ``run-pipeline`` commands in a config's comments (``\\`` continues a line)."""
    logical, pending = [], ""
    for line in config.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip() if line.startswith("#") else ""
        text = f"{pending} {text}".strip() if pending else text
        pending = text[:-1].strip() if text.endswith("\\") else ""
        if text and not pending:
            logical.append(text)
    commands = []
    for text in logical:
        words = text.split()
        while words and ASSIGNMENT.match(words[0]):
            words.pop(0)
        if words and words[0] == "run-pipeline":
            commands.append(text)
    return commands


README_RUNS = {"run-pipeline doctor"}  # tests/test_docs.py runs it already
OFFLINE_STAND_INS = {"attributes.toml": "kind.model=my-classifier.onnx"}
"""Models the tests cannot fetch (ResNet18: no network here), replaced by one built here:
the classifier the object-model tests train (tests/object_models.py)."""
COMMANDS = [
    pytest.param(config.name, command, id=f"{config.stem}-{index}")
    for config in sorted((REPO / "configs").glob("*.toml"))
    for index, command in enumerate(commented_commands(config))
    if " ".join(shlex.split(command, comments=True)) not in README_RUNS
]


def test_the_configs_have_commands() -> None:
    assert len(COMMANDS) >= 8
    joined = [c.values[1] for c in COMMANDS]
    # The continuation was joined: the analytics example carries its line.
    assert any("--set cam.uri=my.mp4" in c and "normalized = true" in c for c in joined)


@pytest.mark.parametrize(("config", "command"), COMMANDS)
def test_config_comment_command_runs(tmp_path: Path, config: str, command: str) -> None:
    words = shlex.split(command, comments=True)
    assigned: dict[str, str] = {}
    while ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        assigned[name] = value
    assert words[0] == "run-pipeline", command
    shutil.copy(asset("media", "horses.mp4"), tmp_path / "my.mp4")
    brightness_classifier(tmp_path / "my-classifier.onnx")
    stand_in = OFFLINE_STAND_INS.get(config)
    if stand_in and stand_in.split("=")[0] + "=" not in command:
        words += ["--set", stand_in]
    args = [str(REPO / w) if w.startswith("configs/") else w for w in words[1:]]
    if args[0] == "serve":  # a service never ends: it must come up and run its stream
        assert args[2:] == [], f"{config}: {command}: only 'serve CONFIG' is checked here"
        with serve(tmp_path, config=Path(args[1])) as served, served.client() as client:
            wait_for(lambda: any(s["frames"] > 0 for s in client.get("/api/streams").json()),
                     120, f"{config}: a frame through {command}")  # fmt: skip
        return
    runs_a_config = any(a.endswith(".toml") for a in args)
    if runs_a_config:
        args += ["--max-frames", "24", "--stats", str(tmp_path / "stats.json")]
    with contextlib.ExitStack() as servers:  # started only for the commands that need them
        # One camera per placeholder, as the command means: CAM1_URL and CAM2_URL are two.
        cameras = (
            servers.enter_context(rtsp_server(asset("media", "people.mp4"))).url
            for _ in iter(int, 1)
        )
        assigned = {k: _fill(v, cameras) for k, v in assigned.items()}
        args = [_fill(a, cameras) for a in args]
        if "VAPIPE_MQTT_HOST" in assigned:
            mqtt = servers.enter_context(broker(tmp_path))
            assigned["VAPIPE_MQTT_HOST"] = "127.0.0.1"
            args += ["--set", f"mqtt.port={mqtt.port}"]
        result = subprocess.run(
            [sys.executable, "-m", "vapipe", *args], cwd=tmp_path,
            env={**os.environ, **assigned}, capture_output=True, text=True, timeout=200,
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, f"{config}: {command}\n{result.stderr[-2000:]}"
    if runs_a_config:  # and it did its work: frames went through every stage
        stats = json.loads((tmp_path / "stats.json").read_text())
        frames = {name: stage.get("frames", 0) for name, stage in stats["stages"].items()}
        assert min(frames.values()) > 0, frames


def _fill(word: str, cameras: Iterator[str]) -> str:
    """Each placeholder camera URL (``rtsp://...``, ``rtsp://user:password@host/...``),
    alone or in ``cam.uri=...``, becomes the URL of a test camera of its own."""
    return re.sub(r"rtsp://\S+", lambda _: next(cameras), word)
