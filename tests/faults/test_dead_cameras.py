"""Cameras that die in the ways cameras die, against the real RTSP server: each is noticed
within its timeout, said in events and errors, and Ctrl-C never waits for a network call."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, cli, read_events, read_lines, spawn, wait_for
from tests.e2e.rtsp import black_hole_watched, free_port, rtsp_server

RTSP = str(REPO / "configs" / "rtsp.toml")


def test_a_black_hole_does_not_delay_ctrl_c(tmp_path: Path) -> None:
    with black_hole_watched() as (port, accepted):
        pipeline = spawn(
            RTSP, "--set", f"cam.uri=rtsp://127.0.0.1:{port}/stream",
            "--set", "cam.open_timeout_s=600", "--log-level", "debug", cwd=tmp_path,
        )  # fmt: skip
        assert pipeline.stderr is not None
        # Connected: now inside av.open, which would wait 600 s for the silent server.
        wait_for(accepted.is_set, 120, "the camera's connection")
        pipeline.send_signal(signal.SIGINT)
        try:  # well before the open timeout, whatever the machine's load
            _, stderr = pipeline.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pipeline.kill()
            pytest.fail("Ctrl-C waited for the open timeout")
    assert pipeline.returncode == 130, stderr[-2000:]


def test_max_attempts_is_the_number_of_attempts(tmp_path: Path) -> None:
    port = free_port()
    result = cli(
        RTSP, "--set", f"cam.uri=rtsp://127.0.0.1:{port}/stream",
        "--set", "cam.reconnect.max_attempts=2", "--set", "cam.reconnect.initial_s=0.1",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.count("; retry ") == 1, "2 attempts: one wait between them"
    assert "gave up after 2 attempts" in result.stderr.strip().splitlines()[-1]


def test_a_wrong_path_is_named_in_the_error(tmp_path: Path, people_mp4: Path) -> None:
    with rtsp_server(people_mp4) as server:
        result = cli(
            RTSP, "--set", f"cam.uri=rtsp://127.0.0.1:{server.port}/nope",
            "--set", "cam.reconnect.max_attempts=1", cwd=tmp_path, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert f"rtsp://127.0.0.1:{server.port}/nope" in last and "Not Found" in last, last


def test_a_paused_server_is_a_stall_then_a_reconnect(tmp_path: Path, people_mp4: Path) -> None:
    events = tmp_path / "out/rtsp/cam.jsonl"
    with rtsp_server(people_mp4) as server:
        pipeline = spawn(
            RTSP, "--set", f"cam.uri={server.url}", "--set", "cam.read_timeout_s=2",
            "--set", "cam.stall_timeout_s=2", "--set", "cam.open_timeout_s=3",
            "--set", "cam.reconnect.initial_s=0.5", "--set", "cam.reconnect.max_s=1",
            cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_for(lambda: len(read_lines(events)) >= 24, 60, "a second of frames")
            assert server.process is not None
            server.process.send_signal(signal.SIGSTOP)  # alive, connected, silent
            # Noticed by the read/stall timeouts (2 s): the wait here only bounds a hang.
            wait_for(lambda: '"source_down"' in events.read_text(), 60, "source_down")
            server.process.send_signal(signal.SIGCONT)
            wait_for(lambda: '"source_up"' in events.read_text(), 60, "source_up")
        finally:
            if server.process is not None:
                server.process.send_signal(signal.SIGCONT)
            pipeline.send_signal(signal.SIGINT)
            pipeline.communicate(timeout=60)
    events_seen = read_events(events)
    kinds = [e["event"] for e in events_seen]
    down = events_seen[kinds.index("source_down")]
    # The stall is what was noticed (not the end of the stream, nor a refused connection).
    assert "no frame for" in down["reason"] or "timed out" in down["reason"].lower(), down
    assert kinds.index("source_down") < kinds.index("source_up")


def test_wrong_credentials_are_a_401_with_the_password_masked(
    tmp_path: Path, people_mp4: Path
) -> None:
    with rtsp_server(people_mp4, login="viewer:right-pass") as server:
        wrong = f"rtsp://viewer:wrong-pass@127.0.0.1:{server.port}/stream"
        result = cli(
            RTSP, "--set", f"cam.uri={wrong}", "--set", "cam.reconnect.max_attempts=1",
            cwd=tmp_path, timeout=60,
        )  # fmt: skip
        right = f"rtsp://viewer:right-pass@127.0.0.1:{server.port}/stream"
        good = cli(RTSP, "--set", f"cam.uri={right}", "--max-frames", "10", cwd=tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert "401" in last or "Unauthorized" in last, last
    assert "wrong-pass" not in result.stderr and "rtsp://***@127.0.0.1" in last
    assert good.returncode == 0, good.stderr[-2000:]
