"""End to end: real clips and models through the real pipeline, in a subprocess."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import onnxruntime as ort
import pytest

from tests.e2e.helpers import (
    FILE_CONFIG,
    REPO,
    cli,
    probe_video,
    read_events,
    read_lines,
    spawn,
    unloadable_model,
    wait_for,
)
from vapipe.stages.infer.backends import providers as eps

# What providers = "auto" picks with whatever onnxruntime build is installed.
BEST_PROVIDER = eps.choose("auto", ort.get_available_providers(), {})[0][0]


@pytest.fixture(scope="module")
def people_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("people")
    result = cli(str(FILE_CONFIG), "--stats", "out/stats.json", cwd=work)
    return work, result


def test_people_clip_events(people_run, people_mp4: Path) -> None:
    work, result = people_run
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(work / "out/events.jsonl")
    frames = [e for e in events if e["event"] == "frame"]
    assert [e["seq"] for e in frames] == list(range(460))
    assert {e["source_id"] for e in frames} == {"cam"}
    pts = [e["pts"] for e in frames]
    assert pts == sorted(pts) and pts[0] == pytest.approx(0.0, abs=0.1)
    assert pts[-1] == pytest.approx(459 * 1001 / 24000, abs=0.05)
    with_person = sum(any(d["class_name"] == "person" for d in e["detections"]) for e in frames)
    assert with_person >= 0.9 * len(frames), f"persons on only {with_person} of 460 frames"
    first = frames[0]
    assert first["time"].endswith("Z") and "T" in first["time"]
    for detection in first["detections"]:
        x1, y1, x2, y2 = detection["xyxy"]
        assert 0 <= x1 < x2 <= 800 and 0 <= y1 < y2 <= 450, detection
        assert 0.3 <= detection["score"] <= 1 and detection["class_name"]


def test_people_clip_video(people_run, people_mp4: Path) -> None:
    work, result = people_run
    assert result.returncode == 0, result.stderr[-2000:]
    out = probe_video(work / "out/annotated.mp4")
    source = probe_video(people_mp4)
    assert (out["frames"], out["width"], out["height"]) == (460, 800, 450)
    assert out["rate"] == source["rate"]
    one_frame = 1 / float(source["rate"])
    assert abs(out["duration"] - source["duration"]) <= one_frame, (out, source)
    assert abs(out["container_duration"] - source["container_duration"]) <= one_frame


def test_people_clip_stats_and_summary(people_run) -> None:
    work, result = people_run
    stats = json.loads((work / "out/stats.json").read_text())
    assert stats["exit_code"] == 0
    assert stats["stages"]["det"]["provider"] == BEST_PROVIDER
    for name in ("cam", "pre", "det", "nms", "video", "events"):
        stage = stats["stages"][name]
        assert stage["frames"] == 460, (name, stage)
        assert stage["fps"] > 0 and stage["p95_ms"] >= stage["mean_ms"] * 0.5
    for queue in stats["queues"].values():
        assert 1 <= queue["high_water"] <= queue["size"] and queue["dropped"] == 0
    assert f"det: provider = {BEST_PROVIDER}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_halfway_leaves_playable_video_and_whole_lines(tmp_path: Path, signum: int) -> None:
    # A looped file never ends by itself, so the signal always lands mid-run.
    process = spawn(str(FILE_CONFIG), "--set", "cam.loop=true", cwd=tmp_path)
    events = tmp_path / "out/events.jsonl"
    wait_for(lambda: len(read_lines(events)) >= 150, 120, "150 events")
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-2000:]
    text = events.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last line is cut"
    lines = read_events(events)
    assert len(lines) >= 150
    assert [e["seq"] for e in lines] == list(range(len(lines)))
    video = probe_video(tmp_path / "out/annotated.mp4")
    assert video["frames"] == len(lines), "the video and the events disagree after the drain"
    assert "Traceback" not in stderr


SLOW_DRAIN = """\
links = ["src ! slow"]
[pipeline]
drain_timeout_s = 600
[nodes.src]
type = "test-count"
count = 1000000
[nodes.slow]
type = "test-collect"
delay_s = 0.5
[queues."src ! slow"]
size = 200
"""


def test_second_ctrl_c_exits_at_once_during_a_long_drain(tmp_path: Path) -> None:
    # 200 queued items at 0.5 s each: the first Ctrl-C starts a 100 s drain, which only the
    # second one may cut short.
    config = tmp_path / "slow.toml"
    config.write_text(SLOW_DRAIN)
    log = tmp_path / "stderr.log"
    code = (
        "import sys, tests.pipeline.stubs; from vapipe.cli.main import main; "
        f"sys.exit(main([{str(config)!r}, '--log-level', 'debug']))"
    )
    with log.open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=stderr)
        wait_for(lambda: "started 2 stage threads" in log.read_text(), 60, "the run to start")
        process.send_signal(signal.SIGINT)
        wait_for(lambda: "stopping: SIGINT" in log.read_text(), 30, "the drain to start")
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(90)
    assert process.returncode == 130
    assert time.monotonic() - started < 50, "the second Ctrl-C waited for the drain"


def test_yolov8_family_runs_end_to_end(tmp_path: Path) -> None:
    result = cli(
        str(FILE_CONFIG),
        "--set",
        "det.model=yolov8n",
        "--max-frames",
        "12",
        "--set",
        "video.path=out/v8.mp4",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    frames = read_events(tmp_path / "out/events.jsonl")
    assert [e["seq"] for e in frames] == list(range(12))
    persons = [d for e in frames for d in e["detections"] if d["class_name"] == "person"]
    assert len(persons) >= 12 * 3, f"{len(persons)} persons in 12 crowded frames"
    assert probe_video(tmp_path / "out/v8.mp4")["frames"] == 12
    assert "yolov8" in result.stderr


@pytest.mark.parametrize("model", ["yolox-nano", "yolov8n"])
def test_still_image_is_a_one_frame_source(tmp_path: Path, model: str) -> None:
    result = cli(
        str(FILE_CONFIG),
        "--set",
        "cam.uri=sample:dog",
        "--set",
        f"det.model={model}",
        "--set",
        "video.path=out/dog.mp4",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (event,) = read_events(tmp_path / "out/events.jsonl")
    found = {d["class_name"] for d in event["detections"]}
    assert {"dog", "bicycle"} <= found and found & {"truck", "car"}, found


def test_runtime_failure_is_one_line_exit_1(tmp_path: Path) -> None:
    broken = unloadable_model(tmp_path / "broken.onnx")
    result = cli(str(FILE_CONFIG), "--set", f"det.model={broken}", cwd=tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stage 'det': cannot load model") and str(broken) in last
    assert "frames  fps" not in result.stderr, "a table of zeros for a run that never started"
    assert "Traceback" not in result.stderr


def test_missing_input_is_exit_2(tmp_path: Path) -> None:
    result = cli(str(FILE_CONFIG), "--set", "cam.uri=nowhere.mp4", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --set cam.uri=nowhere.mp4: node 'cam' key 'uri': input not found: nowhere.mp4"
    )


def test_env_var_picks_input(tmp_path: Path) -> None:
    env_run = subprocess.run(
        [sys.executable, "-m", "vapipe", str(FILE_CONFIG), "--max-frames", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "VAPIPE_INPUT": "sample:horses"},
    )
    assert env_run.returncode == 0, env_run.stderr[-2000:]
    with av.open(str(tmp_path / "out/annotated.mp4")) as container:
        assert container.streams.video[0].codec_context.width == 720  # horses.mp4 is 720x480


@pytest.mark.opencl
@pytest.mark.parametrize("batch", [1, 4])
def test_opencl_preprocessing_end_to_end(tmp_path: Path, batch: int) -> None:
    result = cli(
        str(FILE_CONFIG),
        "--set",
        f"det.max_batch={batch}",
        "--set",
        "pre.backend=opencl",
        "--max-frames",
        "40",
        "--stats",
        "stats.json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "out/events.jsonl")
    assert [e["seq"] for e in events] == list(range(40)), "in-flight frames lost or reordered"
    assert probe_video(tmp_path / "out/annotated.mp4")["frames"] == 40
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["stages"]["pre"]["device"].startswith("opencl: ")
    # people.mp4 is plain yuv420p: every frame travelled as I420 and was drawn from it.
    assert stats["stages"]["cam"]["frames_as_yuv420"] == 40


def test_realtime_file_is_paced_and_loop_keeps_counting(tmp_path: Path) -> None:
    started = time.monotonic()
    result = cli(
        str(FILE_CONFIG),
        "--set",
        "cam.uri=sample:horses",
        "--set",
        "cam.realtime=true",
        "--set",
        "cam.loop=true",
        "--max-frames",
        "150",
        "--set",
        "pre.workers=2",
        "--stats",
        "stats.json",
        cwd=tmp_path,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-2000:]
    # horses.mp4: 120 frames at 29.97 fps; 150 frames in real time take 5 s.
    assert elapsed >= 4.9, f"150 frames at 29.97 fps arrived in {elapsed:.1f} s"
    frames = [e for e in read_events(tmp_path / "out/events.jsonl") if e["event"] == "frame"]
    seqs = [e["seq"] for e in frames]
    assert seqs == sorted(set(seqs)) and seqs[-1] == 149, "seq restarted at the loop"
    pts = [e["pts"] for e in frames]
    assert all(b > a for a, b in itertools.pairwise(pts)), "pts went back at the loop"
    # Paced like a camera, the loop's reopening is time the source was away: its pts span
    # the clip's 149 frame intervals plus that, and never more than the run's wall time.
    assert 149 / 29.97 - 0.01 <= pts[-1] <= elapsed, (pts[-1], elapsed)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["queues"]["cam ! pre"]["leaky"] == "downstream", "realtime files act live"


def test_missing_webcam_is_one_line_exit_2(tmp_path: Path) -> None:
    result = cli(str(FILE_CONFIG), "--set", "cam.uri=webcam:7", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: node 'cam' key 'uri': webcam not found: /dev/video7"
    )


def test_progress_bar_on_a_terminal_and_traceback_at_debug(tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vapipe",
            str(FILE_CONFIG),
            "--set",
            "cam.realtime=true",
            "--max-frames",
            "40",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert process.wait(60) == 0
    screen = b"".join(chunks).decode(errors="replace")
    assert "/40 frames" in screen and "fps" in screen and "\r" in screen, screen[-500:]

    broken = unloadable_model(tmp_path / "broken.onnx")
    quiet = cli(str(FILE_CONFIG), "--set", f"det.model={broken}", cwd=tmp_path)
    loud = cli(
        str(FILE_CONFIG), "--set", f"det.model={broken}", "--log-level", "debug", cwd=tmp_path
    )
    assert quiet.returncode == loud.returncode == 1
    assert "Traceback" not in quiet.stderr and "Traceback" in loud.stderr
