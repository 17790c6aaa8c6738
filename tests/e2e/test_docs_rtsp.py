"""The camera examples of the docs run as written (issue 52): every shell block marked
``<!-- tested: rtsp -->`` runs line by line, its camera URL pointed at a local RTSP server
(tests/rtsp_server.py serving people.mp4) and each line exiting 0. docs/models.md's block
quantises YOLOv8n on the camera's frames, runs the copy and reads its facts back."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import block_params
from tests.e2e.rtsp import rtsp_server

REPO = Path(__file__).resolve().parents[2]
BLOCKS = block_params("tested: rtsp")


def test_the_docs_have_a_camera_block() -> None:
    assert any(p.id.startswith("docs/models.md") for p in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS)
def test_a_camera_block_runs_as_written(tmp_path: Path, people_mp4: Path, block: str) -> None:
    cameras = set(re.findall(r"rtsp://\S+", block))
    assert cameras, "a camera block names its camera"
    outputs = []
    with rtsp_server(people_mp4) as server:
        for line in filter(str.strip, block.splitlines()):
            words = shlex.split(line, comments=True)
            assert words[0] == "run-pipeline", line
            args = [server.url if w in cameras else w for w in words[1:]]
            args = [str(REPO / a) if a.startswith("configs/") else a for a in args]
            done = subprocess.run(
                [sys.executable, "-m", "vapipe", *args], cwd=tmp_path, capture_output=True,
                text=True, timeout=600, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{line}: {done.stderr[-1500:]}"
            outputs.append(done.stdout)
    if "models info" in block:  # what it says of the copy: made from the camera's frames
        facts = outputs[-1]
        assert re.search(rf"calibrated on\s+\d+ frames of {re.escape(server.url)}", facts), facts
        assert re.search(r"agreement\s+\d+(\.\d+)?% of \d+ float detections", facts), facts
