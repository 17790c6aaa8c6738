"""Output time on every path where the input's own clock restarts: a camera reconnecting, a
file of concatenated MPEG-TS clips, a shard started again on a camera. Time is strictly
increasing, never squeezed into microsteps, and spans what was captured."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import time
from pathlib import Path

import av

from tests.conftest import asset
from tests.e2e.helpers import (
    FILE_CONFIG,
    capture_s,
    cli,
    probe_video,
    read_events,
    read_lines,
    spawn,
    wait_for,
)
from tests.e2e.rtsp import rtsp_server
from tests.e2e.test_shards import Running

RATE = 24000 / 1001


def frames(events: list[dict], source: str) -> list[dict]:
    return [e for e in events if e["event"] == "frame" and e["source_id"] == source]


def assert_real_time(frames_seen: list[dict], interval: float) -> None:
    pts = [e["pts"] for e in frames_seen]
    steps = [b - a for a, b in itertools.pairwise(pts)]
    # Strictly increasing, and by real frame steps: frames may be dropped, never squeezed.
    assert min(steps) >= 0.5 * interval, f"a step of {min(steps) * 1e6:.0f} us"
    # A frame's capture time is when it left the decoder. FFmpeg holds the first second or so
    # of a stream while it probes it, and a loaded machine's decoder falls behind, then both
    # come out at once: that adds to a frame's lag (capture minus pts), never takes from it.
    # So the least lag is where the decoder kept pace, and both clocks advanced alike when it
    # is the same on either side of the longest step (the outage, if there was one).
    cut = steps.index(max(steps)) + 1 if max(steps) > 1.0 else len(pts) // 2
    lags = [capture_s(e) - e["pts"] for e in frames_seen]
    before, after = min(lags[:cut]), min(lags[cut:])
    assert abs(after - before) <= 1.0, (before, after)


def test_a_camera_reconnected_keeps_its_time_and_the_outage(tmp_path: Path) -> None:
    people = asset("media", "people.mp4")
    events_path = tmp_path / "out/rtsp/cam.jsonl"
    config = Path(__file__).resolve().parents[2] / "configs" / "rtsp.toml"
    with rtsp_server(people) as server:
        run = spawn(
            str(config), "--set", f"cam.uri={server.url}", "--set", "cam.reconnect.initial_s=0.5",
            "--set", "cam.reconnect.max_s=1", cwd=tmp_path,
        )  # fmt: skip
        wait_for(lambda: len(read_lines(events_path)) >= 48, 90, "two seconds of frames")
        server.kill()
        wait_for(lambda: '"source_down"' in events_path.read_text(), 30, "source_down")
        down_at = time.time()
        wait_for(lambda: time.time() - down_at >= 3, 10, "three seconds of outage")
        with rtsp_server(people, server.port):
            wait_for(lambda: '"source_up"' in events_path.read_text(), 30, "source_up")
            up = len(read_lines(events_path))
            wait_for(lambda: len(read_lines(events_path)) >= up + 96, 90, "4 s after it")
            run.send_signal(signal.SIGINT)
            _, stderr = run.communicate(timeout=60)
            assert run.returncode == 130, stderr[-2000:]
    events = read_events(events_path)
    seen = frames(events, "cam")
    kinds = [e["event"] for e in events]
    before = frames(events[: kinds.index("source_down")], "cam")
    after = frames(events[kinds.index("source_up") :], "cam")
    assert len(before) >= 48 and len(after) >= 60
    assert_real_time(seen, 1 / RATE)
    assert_real_time(after, 1 / RATE)  # the new session's own durations
    # The outage is in the timeline as it was on the wall clock. Measured to a frame 2 s into
    # the new session: its first frames leave the decoder only after FFmpeg's probe, which
    # takes 1.5 s and more on a loaded machine (then they come out at once).
    gap = after[0]["pts"] - before[-1]["pts"]
    caught_up = next(e for e in after if capture_s(e) >= capture_s(after[0]) + 2)
    on_the_wall = capture_s(caught_up) - capture_s(before[-1])
    assert abs(caught_up["pts"] - before[-1]["pts"] - on_the_wall) <= 1.0
    assert gap >= 3.0
    video = probe_video(tmp_path / "out/rtsp/cam.mp4")
    assert video["duration"] >= seen[-1]["pts"] - seen[0]["pts"]


def as_mpegts(clip: Path, target: Path) -> None:
    with av.open(str(clip)) as reader, av.open(str(target), "w", format="mpegts") as writer:
        video = reader.streams.video[0]
        stream = writer.add_stream_from_template(video)
        for packet in reader.demux(video):
            if packet.dts is None:
                continue
            packet.stream = stream
            writer.mux(packet)


def test_concatenated_mpegts_clips_play_one_after_the_other(tmp_path: Path) -> None:
    horses = asset("media", "horses.mp4")
    as_mpegts(horses, tmp_path / "one.ts")
    with (tmp_path / "both.ts").open("wb") as joined:
        for _ in range(2):
            with (tmp_path / "one.ts").open("rb") as part:
                shutil.copyfileobj(part, joined)
    result = cli(str(FILE_CONFIG), "--set", "cam.uri=both.ts", "--stats", "s.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "s.json").read_text())["stages"]["cam"]["clock_restarts"] == 1
    seen = frames(read_events(tmp_path / "out/events.jsonl"), "cam")
    interval = 1001 / 30000
    assert len(seen) == 240
    pts = [e["pts"] for e in seen]
    steps = [b - a for a, b in itertools.pairwise(pts)]
    assert min(steps) >= 0.5 * interval and max(steps) <= 1.5 * interval, (min(steps), max(steps))
    assert abs((pts[-1] - pts[0]) - 239 * interval) < 0.05
    assert probe_video(tmp_path / "out/annotated.mp4")["duration"] >= 240 * interval - 0.05


CAMERAS_IN_SHARDS = """\
links = ["a ! pre", "b ! pre", "pre ! det ! nms ! events"]
[pipeline]
shards = 2
[nodes.a]
type = "source"
uri = "{url}"
[nodes.b]
type = "source"
uri = "{url}"
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


def test_a_shard_restarted_on_a_camera_goes_on_in_real_time(tmp_path: Path) -> None:
    events_path = tmp_path / "events.jsonl"

    def count(source: str) -> int:
        text = events_path.read_text() if events_path.exists() else ""
        return text.count(f'"event":"frame","source_id":"{source}"')

    with rtsp_server(asset("media", "people.mp4")) as server:
        config = tmp_path / "cams.toml"
        config.write_text(CAMERAS_IN_SHARDS.format(url=server.url))
        run = Running(config)
        log = run.lines  # said on a failed wait: where each shard was

        wait_for(lambda: count("b") >= 48, 90, "two seconds of camera b", log)
        os.kill(run.shard_pid(1), signal.SIGKILL)  # shard1 has b
        wait_for(lambda: '"source_up"' in events_path.read_text(), 60, "b back", log)
        restarted = count("b")
        wait_for(lambda: count("b") >= restarted + 96, 90, "four seconds after the restart", log)
        os.killpg(run.process.pid, signal.SIGINT)
        assert run.finish(60) == 130, "\n".join(run.lines[-20:])
    events = read_events(events_path)
    seen = frames(events, "b")
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(set(seqs)), "seq went back after the restart"
    assert_real_time(seen, 1 / RATE)
