"""``run-pipeline serve`` against ``run-pipeline`` on the same graph, and how fast streams
come and go.

    python bench/serve_bench.py --runs 3 --seconds 20

Sides, alternating, each a fresh process on configs/file.toml with the sample clip looped:
``run`` (run-pipeline), ``serve`` (nobody asking anything), ``serve+watch`` (/metrics scraped
every second and one MJPEG viewer). Frames/s is measured in the steady state, from the frame
events written between two instants after a warm-up, the same way for every side. Then, on
one service: add latency (POST to the first live event of the new stream) and remove latency
(DELETE to the answer, which comes once the stream's video file is finished), median of 10.
Writes bench/results/serve.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "file.toml"
OVERRIDES = ["cam.loop=true", "video.path=out/{source_id}.mp4", "events.path=out/{source_id}.jsonl"]
SERVING = re.compile(r"on http://([0-9.]+):(\d+)")


def frame_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.startswith(b'{"event":"frame"'))


def start(side: str, cwd: Path) -> tuple[subprocess.Popen[str], str | None]:
    command = [sys.executable, "-m", "vapipe"]
    command += ["serve", str(CONFIG), "--port", "0"] if side != "run" else [str(CONFIG)]
    for override in OVERRIDES:
        command += ["--set", override]
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if side == "run":
        return process, None
    assert process.stderr is not None
    for line in process.stderr:
        found = SERVING.search(line)
        if found:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep draining
            return process, f"http://{found.group(1)}:{found.group(2)}"
    raise SystemExit(f"serve did not start: {process.wait()}")


def watch(url: str, stop: threading.Event) -> None:
    """The load a person watching brings: metrics every second, one MJPEG viewer."""

    def viewer() -> None:
        with (
            httpx.Client(base_url=url, timeout=None) as client,
            client.stream("GET", "/streams/cam/mjpeg") as response,
        ):
            for _ in response.iter_bytes():
                if stop.is_set():
                    return

    threading.Thread(target=viewer, daemon=True).start()
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.wait(1.0):
            client.get("/metrics")


def steady_fps(side: str, warmup_s: float, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        process, url = start(side, cwd)
        stop = threading.Event()
        if side == "serve+watch" and url is not None:
            threading.Thread(target=watch, args=(url, stop), daemon=True).start()
        events = cwd / "out" / "cam.jsonl"
        deadline = time.monotonic() + 120
        while frame_lines(events) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(warmup_s)
        first, started = frame_lines(events), time.monotonic()
        time.sleep(seconds)
        last, ended = frame_lines(events), time.monotonic()
        stop.set()
        process.send_signal(signal.SIGINT)
        process.wait(120)
        return (last - first) / (ended - started)


def stream_latencies(count: int) -> dict[str, list[float]]:
    clip = Path(os.environ.get("VAPIPE_ASSETS", REPO.parent / "shared")) / "media" / "people.mp4"
    adds, removes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start("serve", Path(tmp))
        assert url is not None
        with httpx.Client(base_url=url, timeout=120) as client:
            for index in range(count):
                stream = f"s{index}"
                seen = threading.Event()

                def listen(stream: str = stream, seen: threading.Event = seen) -> None:
                    with httpx.Client(base_url=url, timeout=120) as sse:
                        query = f"/api/events?type=frame&source={stream}"
                        with sse.stream("GET", query) as response:
                            for line in response.iter_lines():
                                if line.startswith("data: "):
                                    seen.set()
                                    return

                listener = threading.Thread(target=listen, daemon=True)
                listener.start()
                time.sleep(0.5)  # subscribed before the stream exists
                asked = time.monotonic()
                client.post("/api/streams", json={"id": stream, "uri": str(clip),
                                                  "options": {"loop": True}})  # fmt: skip
                seen.wait(120)
                adds.append(time.monotonic() - asked)
                asked = time.monotonic()
                client.delete(f"/api/streams/{stream}")
                removes.append(time.monotonic() - asked)
        process.send_signal(signal.SIGINT)
        process.wait(120)
    return {"add_s": adds, "remove_s": removes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--output", default=str(REPO / "bench/results/serve.json"))
    args = parser.parse_args()
    sides = ("run", "serve", "serve+watch")
    fps: dict[str, list[float]] = {side: [] for side in sides}
    for index in range(args.runs):
        for side in sides:
            fps[side].append(round(steady_fps(side, args.warmup, args.seconds), 2))
            print(f"run {index + 1}: {side} {fps[side][-1]} fps", file=sys.stderr)
    medians = {side: harness.median(values) for side, values in fps.items()}
    latencies = stream_latencies(args.cycles)
    result = {
        "benchmark": "serve against run-pipeline, configs/file.toml, people.mp4 looped",
        "command": f"python bench/serve_bench.py --runs {args.runs} --seconds {args.seconds:g}",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "fps": fps,
        "median_fps": medians,
        "serve_over_run": round(medians["serve"] / medians["run"], 3),
        "serve_watched_over_run": round(medians["serve+watch"] / medians["run"], 3),
        "add_s": [round(v, 3) for v in latencies["add_s"]],
        "remove_s": [round(v, 3) for v in latencies["remove_s"]],
        "median_add_s": round(harness.median(latencies["add_s"]), 3),
        "median_remove_s": round(harness.median(latencies["remove_s"]), 3),
    }
    harness.record(Path(args.output), result)
    print("| side | median fps | runs |\n| --- | --- | --- |")
    for side in sides:
        print(f"| {side} | {medians[side]:.1f} | {', '.join(map(str, fps[side]))} |")
    print(f"\nserve / run {result['serve_over_run']}, watched {result['serve_watched_over_run']}")
    print(f"add (POST to first event) median {result['median_add_s']} s, "
          f"remove (DELETE to finished file) median {result['median_remove_s']} s")  # fmt: skip


if __name__ == "__main__":
    main()
