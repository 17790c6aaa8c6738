"""docs/service.md's live-video block as written: ``run-pipeline configs/live.toml`` runs,
and the player line's RTSP address plays (PyAV standing in for ffplay, with the same
``-fflags nobuffer``): pictures of the annotated stream arrive. The one change: a free port
instead of 8554, which another program here may hold."""

from __future__ import annotations

import re
import shlex
import threading
from pathlib import Path

import av
import pytest

from tests.docs_blocks import block_params
from tests.e2e.helpers import REPO, spawn, wait_for
from tests.e2e.rtsp import free_port

BLOCKS = block_params("tested: live")


def test_the_docs_have_a_live_block() -> None:
    assert [p.id.split("-")[0] for p in BLOCKS] == ["docs/service.md"]


@pytest.mark.parametrize("block", BLOCKS)
def test_the_live_block_plays_as_written(tmp_path: Path, block: str) -> None:
    run_line, play_line = [line for line in block.splitlines() if line.strip()]
    words = shlex.split(run_line, comments=True)
    assert words[:2] == ["run-pipeline", "configs/live.toml"]
    url = re.search(r"rtsp://\S+", play_line)
    assert url and "-fflags nobuffer" in play_line
    port = free_port()
    address = url.group(0).replace(":8554/", f":{port}/")
    run = spawn(str(REPO / words[1]), *words[2:], "--set", f"live.rtsp_port={port}",
                "--no-progress", cwd=tmp_path)  # fmt: skip
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(run.stderr or ()), daemon=True).start()
    try:
        wait_for(lambda: address in "".join(log) or run.poll() is not None, 180,
                 "the stream's address in the log", log)  # fmt: skip
        assert run.poll() is None, "".join(log[-20:])
        options = {"rtsp_transport": "tcp", "fflags": "nobuffer"}
        with av.open(address, options=options, timeout=60) as container:
            pictures = []
            for frame in container.decode(video=0):
                pictures.append(frame.to_ndarray(format="bgr24"))
                if len(pictures) == 5:
                    break
        assert pictures[0].shape == (450, 800, 3)  # the people clip, not scaled (under 1280)
        assert pictures[-1].std() > 20  # a real picture
    finally:
        run.send_signal(2)
        assert run.wait(120) in (0, 130), "".join(log[-20:])
