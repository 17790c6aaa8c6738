"""Live sources against a real RTSP server on loopback: reconnects, timeouts, no hangs."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, cli, probe_video, read_events, read_lines, spawn, wait_for
from tests.e2e.rtsp import black_hole, free_port, rtsp_server

RTSP_CONFIG = REPO / "configs" / "rtsp.toml"
SECRET = "s3cr%40t%2Fx"  # a password holding '@' and '/', percent-encoded as URLs need


def with_credentials(url: str) -> str:
    return url.replace("rtsp://", f"rtsp://admin:{SECRET}@")


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return spawn(str(RTSP_CONFIG), *args, cwd=cwd)


def frames_of(events: list[dict], source: str = "cam") -> list[dict]:
    return [e for e in events if e["event"] == "frame" and e["source_id"] == source]


def test_rtsp_in_events_out_credentials_masked(tmp_path: Path, people_mp4: Path) -> None:
    with rtsp_server(people_mp4) as server:
        result = cli(
            str(RTSP_CONFIG),
            "--set",
            f"cam.uri={with_credentials(server.url)}",
            "--set",
            "cam.reconnect.max_attempts=3",
            "--max-frames",
            "60",
            "--stats",
            "stats.json",
            cwd=tmp_path,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "out/rtsp/cam.jsonl")
    frames = frames_of(events)
    stats_text = (tmp_path / "stats.json").read_text()
    stats = json.loads(stats_text)
    # A live source drops the oldest frame rather than queueing (the first inference is slow,
    # and a loaded 2-core machine keeps under half): every frame is either in the events or
    # counted as dropped.
    dropped = sum(q["dropped"] for q in stats["queues"].values())
    assert len(frames) + dropped == 60 and len(frames) >= 10, (len(frames), dropped)
    assert stats["queues"]["cam ! pre"]["dropped_by_source"] == (
        {"cam": dropped} if dropped else {}
    )
    seqs = [e["seq"] for e in frames]
    assert seqs == sorted(set(seqs)) and seqs[-1] == 59
    pts = [e["pts"] for e in frames]
    assert pts == sorted(pts) and pts[0] == pytest.approx(0.0, abs=0.1)
    assert sum(
        any(d["class_name"] == "person" for d in e["detections"]) for e in frames
    ) >= 0.9 * len(frames)
    assert stats["stages"]["cam"]["uri"] == f"rtsp://***@127.0.0.1:{server.port}/stream"
    latency = stats["stages"]["events"]["latency"]["cam"]
    assert 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert stats["queues"]["cam ! pre"]["leaky"] == "downstream"
    for text in (result.stderr, stats_text, (tmp_path / "out/rtsp/cam.jsonl").read_text()):
        assert "s3cr" not in text and "admin" not in text


def test_server_killed_and_restarted_reconnects(tmp_path: Path, people_mp4: Path) -> None:
    events_path = tmp_path / "out/rtsp/cam.jsonl"
    with rtsp_server(people_mp4) as server:
        pipeline = start(
            "--set",
            f"cam.uri={with_credentials(server.url)}",
            "--set",
            "cam.reconnect.initial_s=0.5",
            "--set",
            "cam.reconnect.max_s=1",
            cwd=tmp_path,
        )
        wait_for(lambda: len(read_lines(events_path)) >= 30, 60, "30 frames before the kill")
        server.kill()
        killed_at = time.time()
        wait_for(lambda: '"source_down"' in events_path.read_text(), 20, "source_down")
        time.sleep(max(0.0, 5 - (time.time() - killed_at)))
    with rtsp_server(people_mp4, server.port):  # the camera comes back where it was
        wait_for(lambda: '"source_up"' in events_path.read_text(), 30, "source_up")
        up_line = next(i for i, line in enumerate(read_lines(events_path)) if "source_up" in line)
        wait_for(
            lambda: len(read_lines(events_path)) >= up_line + 30, 60, "30 frames after the restart"
        )
        pipeline.send_signal(signal.SIGINT)
        _, stderr = pipeline.communicate(timeout=60)
    assert pipeline.returncode == 130, stderr[-2000:]
    events = read_events(events_path)
    kinds = [e["event"] for e in events]
    down, up = kinds.index("source_down"), kinds.index("source_up")
    assert down < up
    assert events[down]["reason"] and events[up]["attempt"] >= 1 and events[up]["down_s"] >= 4
    before, after = frames_of(events[:down]), frames_of(events[up:])
    assert len(before) >= 30 and len(after) >= 25
    assert after[0]["seq"] > before[-1]["seq"], "seq restarted after the reconnect"
    pts = [e["pts"] for e in frames_of(events)]
    assert all(b > a for a, b in itertools.pairwise(pts)), "pts went backwards"
    assert "s3cr" not in stderr and "s3cr" not in events_path.read_text()
    # The recording survives the drop: every frame that reached the sinks is in it, in order,
    # and its timeline keeps the outage (the frames' own pts).
    video = probe_video(tmp_path / "out/rtsp/cam.mp4")
    assert video["frames"] == len(frames_of(events))
    assert video["duration"] >= pts[-1] - pts[0], "the outage was squeezed out of the video"


def test_server_that_never_comes_up_gives_up_with_a_clear_error(tmp_path: Path) -> None:
    port = free_port()
    result = cli(
        str(RTSP_CONFIG),
        "--set",
        f"cam.uri={with_credentials(f'rtsp://127.0.0.1:{port}/stream')}",
        "--set",
        "cam.reconnect.max_attempts=3",
        "--set",
        "cam.reconnect.initial_s=0.2",
        "--set",
        "cam.reconnect.max_s=0.5",
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    url = f"rtsp://***@127.0.0.1:{port}/stream"
    assert last == (
        f"error: stage 'cam' (source 'cam'): {url}: gave up after 3 attempts: "
        f"cannot open {url}: Connection refused"
    ), last
    assert "s3cr" not in result.stderr
    (down,) = read_events(tmp_path / "out/rtsp/cam.jsonl")
    assert down["event"] == "source_down"


def test_retrying_forever_is_stopped_by_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    with log.open("w") as stderr:
        pipeline = subprocess.Popen(
            [sys.executable, "-m", "vapipe", str(RTSP_CONFIG), "--set",
             f"cam.uri=rtsp://127.0.0.1:{free_port()}/stream", "--set",
             "cam.reconnect.initial_s=0.2", "--set", "cam.reconnect.max_s=0.2"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )  # fmt: skip
        # configs/rtsp.toml's max_attempts = 0 keeps trying: still running at a 12th attempt.
        wait_for(lambda: "; retry 12 in" in log.read_text(), 120, "a 12th attempt")
        assert pipeline.poll() is None, log.read_text()[-2000:]
        pipeline.send_signal(signal.SIGINT)
        pipeline.communicate(timeout=60)
    assert pipeline.returncode == 130, log.read_text()[-2000:]


def test_black_hole_server_cannot_hang_the_source(tmp_path: Path) -> None:
    with black_hole() as port:
        result = cli(
            str(RTSP_CONFIG),
            "--set",
            f"cam.uri=rtsp://127.0.0.1:{port}/stream",
            "--set",
            "cam.open_timeout_s=2",
            "--set",
            "cam.read_timeout_s=2",
            "--set",
            "cam.reconnect.max_attempts=2",
            "--set",
            "cam.reconnect.initial_s=0.2",
            cwd=tmp_path,
            timeout=90,  # a hang fails the test here, with every thread's stack
        )
    assert result.returncode == 1, result.stderr[-2000:]
    assert "gave up after 2 attempts" in result.stderr.strip().splitlines()[-1]


TWO_CAMERAS = """\
links = ["a ! pre", "b ! pre", "pre ! det ! nms ! events"]
[pipeline]
queue_size = 4
[nodes.a]
type = "source"
uri = "{a}"
[nodes.b]
type = "source"
uri = "{b}"
reconnect = {{ initial_s = 0.5, max_s = 1 }}
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 4
[nodes.nms]
type = "nms"
[nodes.events]
type = "events"
path = "events.jsonl"
"""


def test_one_camera_dying_does_not_stop_the_other(tmp_path: Path, people_mp4: Path) -> None:
    traffic = people_mp4.with_name("traffic.mp4")
    events_path = tmp_path / "events.jsonl"

    def text() -> str:
        return events_path.read_text() if events_path.exists() else ""

    with rtsp_server(people_mp4) as cam_a, rtsp_server(traffic) as cam_b:
        config = tmp_path / "two.toml"
        config.write_text(TWO_CAMERAS.format(a=cam_a.url, b=cam_b.url))
        pipeline = spawn(str(config), cwd=tmp_path)
        wait_for(lambda: text().count('"b"') >= 24, 60, "frames from both cameras")
        cam_b.kill()  # and it stays away: b retries for the rest of the run
        wait_for(lambda: '"source_down"' in text(), 60, "b down")
        down_at = len(read_lines(events_path))
        # While b keeps failing to reconnect, a goes on: three seconds of its frames.
        wait_for(
            lambda: "".join(read_lines(events_path)[down_at:]).count('"source_id":"a"') >= 72,
            90,
            "camera a's frames while b is down",
        )
        pipeline.send_signal(signal.SIGINT)
        _, stderr = pipeline.communicate(timeout=60)
    assert pipeline.returncode == 130, stderr[-2000:]
    events = read_events(events_path)
    kinds = [(e["event"], e["source_id"]) for e in events]
    assert ("source_down", "b") in kinds and ("source_up", "b") not in kinds
    seqs = [e["seq"] for e in frames_of(events, "a")]
    assert seqs == sorted(set(seqs)), "camera a's frames out of order"
