"""Soak: a camera pipeline on a long RTSP stream whose server restarts every few minutes.

    python bench/soak_bench.py --minutes 20 --restart-every 240

Serves people.mp4 (concatenated to 4 minutes) with the GStreamer RTSP test server, runs
``run-pipeline configs/rtsp.toml`` against it, kills and restarts the server every
``--restart-every`` seconds, and samples the pipeline's RSS, threads and open file descriptors
every 10 s. Reports the RSS slope and growth after warm-up (2 minutes), the thread and fd
ranges, reconnects (source_up events) and drops. Writes bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline.assets import resolve_media  # noqa: E402

WARM_UP_S = 120


def long_clip(source: Path, target: Path, seconds: float) -> None:
    """``source`` repeated (packets copied, timestamps shifted) for about ``seconds``."""
    with av.open(str(source)) as first:
        stream = first.streams.video[0]
        span = float(stream.duration * stream.time_base) if stream.duration else 19.0
    with av.open(str(target), "w") as out:
        copy = None
        offset = 0
        while offset * span < seconds:
            with av.open(str(source)) as container:
                video = container.streams.video[0]
                if copy is None:
                    copy = out.add_stream_from_template(video)
                shift = round(offset * span / video.time_base)
                for packet in container.demux(video):
                    if packet.dts is None:
                        continue
                    packet.pts += shift
                    packet.dts += shift
                    packet.stream = copy
                    out.mux(packet)
            offset += 1


def start_server(clip: Path, port: int = 0) -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen(
        ["/usr/bin/python3", str(REPO / "tests/rtsp_server.py"), str(port), str(clip)],
        stdout=subprocess.PIPE,
        text=True,
    )
    ready = server.stdout.readline().split()  # type: ignore[union-attr]
    if not ready or ready[0] != "ready":
        raise SystemExit("the RTSP server did not start")
    return server, int(ready[1])


def sample(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--restart-every", type=float, default=240)
    parser.add_argument("--output", default=str(REPO / "bench/results/soak.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clip = folder / "long.mp4"
        long_clip(Path(resolve_media("sample:people")), clip, 240)
        server, port = start_server(clip)
        pipeline = subprocess.Popen(
            [sys.executable, "-m", "vapipe", str(REPO / "configs/rtsp.toml"),
             "--set", f"cam.uri=rtsp://127.0.0.1:{port}/stream",
             "--set", "cam.reconnect.max_s=2", "--stats", "stats.json", "--no-progress"],
            cwd=folder, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.monotonic()
        samples, restarts, last_restart = [], 0, started
        try:
            while (now := time.monotonic()) - started < args.minutes * 60:
                if pipeline.poll() is not None:
                    raise SystemExit(f"the pipeline exited early ({pipeline.returncode})")
                samples.append({"t_s": round(now - started, 1), **sample(pipeline.pid)})
                if now - last_restart >= args.restart_every:
                    server.kill()
                    server.wait()
                    time.sleep(3)  # the camera is away for a moment
                    server, _ = start_server(clip, port)
                    restarts, last_restart = restarts + 1, time.monotonic()
                time.sleep(10)
        finally:
            pipeline.send_signal(signal.SIGINT)
            code = pipeline.wait(120)
            server.kill()
        events = (folder / "out/cam.jsonl").read_text().splitlines()
        stats = json.loads((folder / "stats.json").read_text())
    ups = sum('"event":"source_up"' in line for line in events)
    frames = sum('"event":"frame"' in line for line in events)
    late = [s for s in samples if s["t_s"] >= WARM_UP_S]
    t = np.array([s["t_s"] for s in late])
    rss = np.array([s["rss_mb"] for s in late])
    slope = float(np.polyfit(t / 60, rss, 1)[0]) if len(late) > 2 else float("nan")
    report = {
        "benchmark": "soak: configs/rtsp.toml on a looping RTSP stream, server restarted",
        "command": f"python bench/soak_bench.py --minutes {args.minutes:g} "
        f"--restart-every {args.restart_every:g}",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count()},
        "exit_code": code,
        "server_restarts": restarts,
        "source_up_events": ups,
        "frames_out": frames,
        "dropped": sum(q["dropped"] for q in stats["queues"].values()),
        "rss_mb_after_warm_up": {"first": rss[0], "last": rss[-1], "max": rss.max()}
        if len(late)
        else None,
        "rss_growth_after_warm_up_mb": round(float(rss.max() - rss[0]), 1) if len(late) else None,
        "rss_slope_mb_per_min": round(slope, 3),
        "threads_after_warm_up": [min(s["threads"] for s in late), max(s["threads"] for s in late)]
        if late
        else None,
        "fds_after_warm_up": [min(s["fds"] for s in late), max(s["fds"] for s in late)]
        if late
        else None,
        "samples": samples,
    }
    harness.record(Path(args.output), report)
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1, default=float))


if __name__ == "__main__":
    main()
