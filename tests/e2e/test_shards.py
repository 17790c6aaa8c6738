"""Shards end to end: real processes, real media, events merged in the parent."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.e2e.helpers import cli, probe_video, read_events, wait_for
from vapipe.stages.source.stage import decoder_share

THREE_SOURCES = """\
links = ["people ! pre", "traffic ! pre", "horses ! pre", "pre ! det ! nms ! track ! video",
         "track ! events"]

[pipeline]
shards = {shards}
shard_restarts = {restarts}

[nodes.people]
type = "source"
uri = "sample:people"
{extra}
[nodes.traffic]
type = "source"
uri = "sample:traffic"
{extra}
[nodes.horses]
type = "source"
uri = "sample:horses"
{extra}
[nodes.pre]
type = "preprocess"

[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 4
batch_timeout_ms = 20

[nodes.nms]
type = "nms"

[nodes.track]
type = "track"

[nodes.video]
type = "video"
path = "out/{{source_id}}.mp4"

[nodes.events]
type = "events"
path = "out/events.jsonl"
"""


def write_config(folder: Path, shards: int, restarts: int = 3, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "shards.toml"
    path.write_text(THREE_SOURCES.format(shards=shards, restarts=restarts, extra=extra))
    return path


def frames_by_source(events: list[dict]) -> dict[str, list[dict]]:
    result: dict[str, list[dict]] = {}
    for event in events:
        if event["event"] == "frame":
            result.setdefault(event["source_id"], []).append(event)
    return result


def same_detections(one: dict[str, list[dict]], other: dict[str, list[dict]]) -> None:
    """Frame by frame, the same objects with the same track ids in the same places."""
    for source in one:
        for a, b in zip(one[source], other[source], strict=True):
            assert len(a["detections"]) == len(b["detections"]), (source, a["seq"])
            for x, y in zip(a["detections"], b["detections"], strict=True):
                assert x["class_id"] == y["class_id"]
                assert x["track_id"] == y["track_id"]
                assert x["xyxy"] == pytest.approx(y["xyxy"], abs=0.1)


def test_two_shards_write_the_same_events_as_one_process(tmp_path: Path) -> None:
    runs = {}
    for shards in (1, 2):
        folder = tmp_path / f"s{shards}"
        config = write_config(folder, shards)
        # Two GPU ids on a machine without GPUs: each shard is given one, and nothing changes.
        # ... and each its own core for its threads (python_cpus = 1: shard k the k-th core).
        devices = ("--set", "pipeline.devices=['0', '1']", "--set", "pipeline.python_cpus=1")
        devices = devices if shards == 2 else ()
        result = cli(str(config), "--max-frames", "40", "--stats", "stats.json", *devices,
                     cwd=folder)  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        runs[shards] = (folder, read_events(folder / "out" / "events.jsonl"))
    assert re.search(r"shard1 \(pid \d+, device 1\): traffic", result.stderr), result.stderr
    one, two = (frames_by_source(runs[n][1]) for n in (1, 2))
    assert sorted(one) == sorted(two) == ["horses", "people", "traffic"]
    for source in one:
        assert [e["seq"] for e in two[source]] == list(range(40)), source  # in order, no gaps
    same_detections(one, two)
    folder = runs[2][0]
    stats = json.loads((folder / "stats.json").read_text())
    shards = stats["shards"]
    assert [s["sources"] for s in shards] == [["people", "horses"], ["traffic"]]
    pids = {s["process"]["pid"] for s in shards}
    assert len(pids) == 2 and os.getpid() not in pids
    assert [(s["device"], s["process"]["visible_devices"]) for s in shards] == [
        ("0", "0"), ("1", "1"),
    ]  # fmt: skip
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        assert [s["python_cpus"] for s in shards] == [cores[:1], cores[1:2]]
    assert all(s["startup"]["to_ready_s"] > 0 for s in shards)
    assert all(s["process"]["peak_rss_mb"] > 50 for s in shards)
    # Start-up: from the parent's spawn to the threads running, at least the stages' opening.
    for shard in shards:
        opening = sum(stage.get("open_s", 0) for stage in shard["stages"].values())
        assert 0 < opening <= shard["process"]["ready_s"] <= stats["ready_s"]
    assert stats["stages"]["det"]["frames"] == 120  # summed over the shards
    assert stats["stages"]["events"]["lines"] == 120  # written once, by the parent
    # The three decoders share the machine's cores, whichever shard each one runs in.
    share = decoder_share(3) or "auto"
    assert shards[1]["stages"]["traffic"]["decode_threads"] == share
    assert shards[0]["stages"]["people"]["decode_threads"] == share
    for source in ("people", "traffic", "horses"):
        assert probe_video(folder / "out" / f"{source}.mp4")["frames"] == 40


class Running:
    """The CLI in its own session (like a terminal's foreground job), stderr collected."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vapipe", str(config), *args],
            cwd=config.parent,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def shard_pid(self, index: int) -> int:
        """The pid of the shard's newest process."""
        pattern = re.compile(rf"shard{index} \(pid (\d+)")
        for line in reversed(self.lines):
            match = pattern.search(line)
            if match:
                return int(match.group(1))
        raise AssertionError(f"no shard{index} pid in the log")

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            pytest.fail("the run did not end:\n" + "\n".join(self.lines[-40:]))
        self._reader.join(5)
        return code


def wait_for_every_source(events: Path) -> None:
    def seen() -> bool:
        text = events.read_text() if events.exists() else ""
        return all(f'"source_id":"{s}"' in text for s in ("people", "traffic", "horses"))

    wait_for(seen, 90, "events of every source")


REALTIME = "realtime = true\nlive = false\n"  # paced like a camera, but no frame dropped


def test_a_killed_shard_is_restarted_and_its_file_goes_on_without_gaps(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, extra=REALTIME)
    events = tmp_path / "out" / "events.jsonl"
    run = Running(config, "--max-frames", "200")

    def traffic_frames() -> int:
        text = events.read_text() if events.exists() else ""
        return text.count('"event":"frame","source_id":"traffic"')

    # Past the first keyframe intervals (2 s each): the killed shard's video has fragments.
    wait_for(lambda: traffic_frames() >= 110, 90, "110 traffic frames")
    os.kill(run.shard_pid(1), signal.SIGKILL)  # shard1 has traffic
    assert run.finish() == 0, "\n".join(run.lines[-30:])
    records = read_events(events)
    traffic = [e for e in records if e["source_id"] == "traffic"]
    kinds = [e["event"] for e in traffic]
    assert kinds.count("source_down") == 1 and kinds.count("source_up") == 1
    down = next(e for e in traffic if e["event"] == "source_down")
    assert "shard 1 (traffic) died (killed by SIGKILL)" in down["reason"]
    assert kinds.index("source_down") < kinds.index("source_up")
    # Every frame once, in order: the restarted shard skipped what had been delivered.
    assert [e["seq"] for e in traffic if e["event"] == "frame"] == list(range(200))
    for source in ("people", "horses"):  # the other shard never noticed
        seqs = [e["seq"] for e in records if e["source_id"] == source and e["event"] == "frame"]
        assert seqs == list(range(min(200, len(seqs)))) and len(seqs) >= 120, source
    assert any("starting it again (1 of 3)" in line for line in run.lines)
    # The video of the killed shard stays as it was left (fragmented: it plays), under the
    # name of an unfinished recording; the restarted shard writes a file of its own.
    assert probe_video(tmp_path / "out" / "traffic.partial.mp4")["frames"] > 0
    assert probe_video(tmp_path / "out" / "traffic.restart1.mp4")["frames"] > 0


def test_a_shard_dying_past_its_restarts_fails_the_run_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, restarts=0, extra=REALTIME + "loop = true\n")
    events = tmp_path / "out" / "events.jsonl"
    run = Running(config)
    wait_for_every_source(events)
    os.kill(run.shard_pid(1), signal.SIGKILL)
    assert run.finish() == 1
    assert run.lines[-1] == (
        "error: shard 1 (traffic) died (killed by SIGKILL); restarted 0 times, no more"
    )
    records = read_events(events)  # whole lines only, the other shard drained
    assert {e["source_id"] for e in records} == {"people", "traffic", "horses"}
    assert probe_video(tmp_path / "out" / "people.mp4")["frames"] > 0


def test_a_shard_hung_whole_at_the_stop_is_killed_and_said_so(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, restarts=0, extra=REALTIME + "loop = true\n")
    text = config.read_text().replace("[pipeline]\n", "[pipeline]\ndrain_timeout_s = 1\n")
    config.write_text(text)
    run = Running(config)
    wait_for_every_source(tmp_path / "out" / "events.jsonl")
    hung = run.shard_pid(1)
    os.kill(hung, signal.SIGSTOP)  # hung whole: not even its signal handlers run
    try:
        os.kill(run.process.pid, signal.SIGINT)
        assert run.finish(90) == 1, "\n".join(run.lines[-30:])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hung, signal.SIGCONT)
    assert any("shards did not drain within 11 s (shard 1)" in line for line in run.lines)
    assert run.lines[-1] == (
        "error: shard 1 (traffic) did not drain after the stop and was killed (killed by "
        "SIGKILL); restarted 0 times, no more"
    )
    # The shard that drained finished its videos.
    for source in ("people", "horses"):
        assert probe_video(tmp_path / "out" / f"{source}.mp4")["frames"] > 0, source


def test_ctrl_c_drains_every_shard(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, extra=REALTIME + "loop = true\n")
    events = tmp_path / "out" / "events.jsonl"
    run = Running(config)
    wait_for_every_source(events)
    os.killpg(run.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process
    assert run.finish(60) == 130, "\n".join(run.lines[-30:])
    assert "interrupted: outputs were flushed and closed" in run.lines[-1]
    records = read_events(events)
    for source in ("people", "traffic", "horses"):
        seqs = [e["seq"] for e in records if e["source_id"] == source and e["event"] == "frame"]
        assert seqs == list(range(len(seqs))) and seqs, source
        # The shard's video got every frame its events did: drained, not cut off.
        assert probe_video(tmp_path / "out" / f"{source}.mp4")["frames"] >= len(seqs) - 1


def test_shards_do_not_outlive_a_killed_parent(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, extra=REALTIME + "loop = true\n")
    run = Running(config)
    wait_for_every_source(tmp_path / "out" / "events.jsonl")
    shards = [run.shard_pid(0), run.shard_pid(1)]
    os.kill(run.process.pid, signal.SIGKILL)  # no drain, no goodbye: the OOM killer's way
    run.finish(30)

    def gone() -> bool:
        return not any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in shards)

    wait_for(gone, 30, "the orphaned shards to stop")
    # Told by SIGTERM that the parent is gone, each shard drained and finished its videos.
    for source in ("people", "traffic", "horses"):
        assert probe_video(tmp_path / "out" / f"{source}.mp4")["frames"] > 0, source
    assert not list((tmp_path / "out").glob("*.partial*"))
    assert not any("Traceback" in line for line in run.lines), "\n".join(run.lines[-30:])


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def test_a_restarted_shard_runs_the_config_the_run_started_with(tmp_path: Path) -> None:
    config = write_config(tmp_path, shards=2, extra=REALTIME)
    events = tmp_path / "out" / "events.jsonl"
    run = Running(config, "--max-frames", "240")

    def traffic(kind: str) -> int:
        text = events.read_text() if events.exists() else ""
        return text.count(f'"event":"{kind}","source_id":"traffic"')

    wait_for(lambda: traffic("frame") >= 48, 90, "48 traffic frames")
    # Edited while the run goes on: a shard started again must not pick the edit up...
    config.write_text(config.read_text().replace('type = "nms"', 'type = "nms"\nconf = 0.97'))
    os.kill(run.shard_pid(1), signal.SIGKILL)  # shard1 has traffic
    wait_for(lambda: traffic("source_up") >= 1, 60, "traffic back")
    up_at = traffic("frame")
    wait_for(lambda: traffic("frame") >= up_at + 48, 90, "48 frames after the restart")
    # ... nor need the file at all once the run has started.
    config.unlink()
    os.kill(run.shard_pid(1), signal.SIGKILL)  # the one started again
    wait_for(lambda: traffic("source_up") >= 2, 60, "traffic back again")
    assert run.finish() == 0, "\n".join(run.lines[-30:])
    frames = [e for e in read_events(events) if e["event"] == "frame"]
    traffic_frames = [e for e in frames if e["source_id"] == "traffic"]
    assert [e["seq"] for e in traffic_frames] == list(range(240))
    after_edit = [d["score"] for e in traffic_frames[up_at:] for d in e["detections"]]
    assert after_edit and min(after_edit) < 0.9, "the restarted shard used the edited file"
