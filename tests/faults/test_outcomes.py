"""Honest outcomes: what a run claims matches what it did. Full disks, non-finite numbers,
closed pipes, unwritable outputs and config problems found late each end the way they should."""

from __future__ import annotations

import contextlib
import http.server
import json
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import av
import numpy as np
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, REPO, cli, read_events
from tests.faults.test_bad_files import remux
from vapipe.pipeline.detections import Detections
from vapipe.stages.events.records import to_json
from vapipe.stages.nms import NmsConfig, NmsStage

EVENTS_ONLY = """\
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "sample:people"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
[nodes.events]
type = "events"
path = "events.jsonl"
"""


def test_a_full_disk_leaves_only_whole_lines(tmp_path: Path) -> None:
    config = tmp_path / "events.toml"
    config.write_text(EVENTS_ONLY)
    limit = 60_000  # bytes any file of this process may hold: the disk is "full" there

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run(
        [sys.executable, "-m", "vapipe", str(config)],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, preexec_fn=small_files,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert "stage 'events'" in result.stderr.strip().splitlines()[-1]
    data = (tmp_path / "events.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= limit
    lines = [json.loads(line) for line in data.decode().splitlines()]
    assert [e["seq"] for e in lines] == list(range(len(lines))) and len(lines) > 20


def test_non_finite_detections_are_dropped_counted_and_never_written() -> None:
    stage = NmsStage("nms", NmsConfig(conf=0.1))
    found = Detections(
        np.array([[0, 0, 10, 10], [5, 5, np.inf, 9], [20, 20, 30, 30], [40, 40, 50, 50]],
                 np.float32),
        np.array([0.9, 0.8, np.nan, np.inf], np.float32),
        np.zeros(4, np.int32),
    )  # fmt: skip
    kept = stage.select(found, None)
    assert kept.score.tolist() == [pytest.approx(0.9)]
    assert stage.stats()["non_finite"] == 3
    # what still reaches a sink non-finite (a second model's value) is written as null
    assert to_json({"event": "frame", "score": float("inf")}) == '{"event":"frame","score":null}'


def test_stdout_closed_by_its_reader_is_not_an_error(tmp_path: Path) -> None:
    pipeline = subprocess.Popen(
        [sys.executable, "-m", "vapipe", str(FILE_CONFIG), "--set", "events.path=-"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert pipeline.stdout is not None
    first = [pipeline.stdout.readline() for _ in range(3)]  # like `| head -3`
    pipeline.stdout.close()
    _, stderr = pipeline.communicate(timeout=240)
    assert all(json.loads(line)["event"] == "frame" for line in first)
    assert pipeline.returncode == 0, stderr.decode()[-2000:]
    assert b"Broken pipe" not in stderr and b"Traceback" not in stderr


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            ["--stats", "/proc/nope/stats.json"],
            "cannot write --stats /proc/nope/stats.json",
            id="stats-unwritable",
        ),
        pytest.param(
            ["--set", "events.path=/proc/nope/e.jsonl"],
            "node 'events' key 'path': cannot",
            id="events-unwritable",
        ),
        pytest.param(
            ["--set", "video.path=/proc/nope/v.mp4"],
            "node 'video' key 'path': cannot",
            id="video-unwritable",
        ),
        pytest.param(
            ["--set", "video.path=out/{camera}.mp4"],
            "node 'video' key 'path': bad placeholder",
            id="bad-placeholder",
        ),
        pytest.param(
            ["--set", "video.codec=nosuchcodec"],
            "node 'video' key 'codec': encoder 'nosuchcodec' is not in this FFmpeg",
            id="codec",
        ),
    ],
)
def test_config_problems_found_late_are_exit_2(
    tmp_path: Path, overrides: list[str], expected: str
) -> None:
    result = cli(str(FILE_CONFIG), "--max-frames", "5", *overrides, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr


def test_queue_size_is_bounded(tmp_path: Path) -> None:
    text = (
        (REPO / "configs" / "file.toml")
        .read_text()
        .replace("queue_size = 8", "queue_size = 1000000000000")
    )
    config = tmp_path / "big.toml"
    config.write_text(text)
    result = cli(str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert "key 'pipeline.queue_size': input should be less than or equal to 100000" in (
        result.stderr
    )


def test_a_one_pixel_video_runs(tmp_path: Path) -> None:
    clip = tmp_path / "dot.mkv"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("ffv1", rate=25)  # lossless: any size, one pixel too
        stream.width, stream.height, stream.pix_fmt = 1, 1, "bgr0"
        for _ in range(5):
            dot = av.VideoFrame.from_ndarray(np.full((1, 1, 3), 200, np.uint8), format="bgr24")
            for packet in stream.encode(dot):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={clip}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(read_events(tmp_path / "out/events.jsonl")) == 5


@contextlib.contextmanager
def http_folder(folder: Path) -> Iterator[int]:
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[assignment]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_http_inputs_are_opened_by_ffmpeg(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    # Index first: http.server answers no range requests, so the file must stream.
    remux(asset("media", "horses.mp4"), tmp_path / "www" / "horses.mp4", faststart=True)
    with http_folder(tmp_path / "www") as port:
        result = cli(
            str(FILE_CONFIG), "--set", f"cam.uri=http://127.0.0.1:{port}/horses.mp4",
            cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(read_events(tmp_path / "out/events.jsonl")) == 120
