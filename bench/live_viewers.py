"""What live viewers cost and see: a camera-like source (the people clip, each frame's number
stamped into it as a row of black and white blocks, read at real time) through a ``live``
node, watched by 0, 1, 4 and 16 clients at once, over RTSP (PyAV, as VLC or ffplay would)
and over HTTP as fragmented MP4 (the page's stream, read by PyAV). Each client reads the
number back from every picture it decodes: latency = when it had the picture - when that
frame left the source's decoder (the frame event's time): glass to glass but the camera's
own delay. CPU = the CPU seconds per second of the measured window of the pipeline process
and its RTSP server process (encoding once, fan-out; the clients run in this process).

    python bench/live_viewers.py --seconds 20

Writes bench/results/live_viewers.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

REPO = Path(__file__).resolve().parent.parent
BITS, BLOCK = 12, 32
"""The frame number as 12 blocks of 32 x 32 pixels, most significant first, then a white one."""


def stamped_clip(source: Path, target: Path, frames: int) -> None:
    """``frames`` pictures of ``source`` (looped), each with its number stamped top left."""
    with av.open(str(source)) as probe:
        stream = probe.streams.video[0]
        rate = stream.average_rate
    pictures: list[np.ndarray] = []
    with av.open(str(source)) as container:
        pictures = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    with av.open(str(target), "w") as out:
        video = out.add_stream("libx264", rate=rate)
        height, width = pictures[0].shape[:2]
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.options = {"crf": "18", "g": "24"}
        for index in range(frames):
            image = pictures[index % len(pictures)].copy()
            for bit in range(BITS + 1):
                on = bit == BITS or (index >> (BITS - 1 - bit)) & 1
                image[0:BLOCK, bit * BLOCK : (bit + 1) * BLOCK] = 255 if on else 0
            for packet in video.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in video.encode(None):
            out.mux(packet)


def read_stamp(picture: np.ndarray) -> int | None:
    """The frame number stamped in a picture (None where the white end block is not white:
    not a stamped picture, or scaled)."""
    centres = [
        float(picture[8 : BLOCK - 8, bit * BLOCK + 8 : (bit + 1) * BLOCK - 8].mean())
        for bit in range(BITS + 1)
    ]
    if centres[-1] < 160:
        return None
    value = 0
    for level in centres[:BITS]:
        value = (value << 1) | (level > 128)
    return value


class Client:
    """One viewer: decodes the stream and notes (frame number, time it had the picture)."""

    def __init__(self, url: str, stop: threading.Event) -> None:
        self.seen: list[tuple[int, float]] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, args=(url, stop), daemon=True)
        self.thread.start()

    def _run(self, url: str, stop: threading.Event) -> None:
        # Probe as little as a live player does, not seconds of the stream (nobuffer, as
        # ffplay -fflags nobuffer, over RTSP only: FFmpeg's MP4 reader fails with it).
        options = {"probesize": "32768", "analyzeduration": "0"}
        if url.startswith("rtsp"):
            options.update({"rtsp_transport": "tcp", "fflags": "nobuffer"})
        try:
            with av.open(url, options=options, timeout=30) as container:
                for frame in container.decode(video=0):
                    stamp = read_stamp(frame.to_ndarray(format="bgr24"))
                    if stamp is not None:
                        self.seen.append((stamp, time.time()))
                    if stop.is_set():
                        return
        except av.FFmpegError as exc:
            if not stop.is_set():
                self.error = str(exc)


def cpu_seconds(pid: int) -> float:
    """CPU seconds of the process and its children now (the RTSP server is one)."""
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = children.read_text().split() if children.exists() else []
    for one in [pid, *map(int, kids)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def spread(values: list[float]) -> dict[str, float]:
    ordered = np.sort(np.asarray(values))
    return {
        "median": round(float(np.median(ordered)), 1),
        "p95": round(float(np.percentile(ordered, 95)), 1),
        "max": round(float(ordered[-1]), 1),
        "pictures": len(values),
    }


def capture_times(events: Path) -> dict[int, float]:
    times = {}
    for line in events.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "frame":
            stamp = datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()
            times[record["seq"]] = stamp
    return times


CONFIG = """links = ["cam ! live ! events"]
[nodes.cam]
type = "source"
uri = "{clip}"
realtime = true
[nodes.live]
type = "live"
rtsp_port = 0
fps = {fps}
draw = false
[nodes.events]
type = "events"
path = "events.jsonl"
"""


def one_run(clip: Path, folder: Path, protocol: str, viewers: int, seconds: float,
            fps: float) -> dict[str, Any]:  # fmt: skip
    folder.mkdir(parents=True)
    (folder / "live.toml").write_text(CONFIG.format(clip=clip, fps=fps))
    command = [sys.executable, "-m", "vapipe"]
    if protocol == "http":
        command += ["serve", "live.toml", "--port", "0"]
    else:
        command += ["live.toml"]
    process = subprocess.Popen([*command, "--log-level", "info"], cwd=folder, text=True,
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)  # fmt: skip
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(process.stderr or ()), daemon=True).start()
    pattern = r"rtsp://\S+" if protocol == "rtsp" else r"http://127\.0\.0\.1:\d+"
    deadline = time.monotonic() + 120
    while not (found := re.search(pattern, "".join(log))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert found, "".join(log[-20:])
    url = found.group(0) + ("/streams/cam/live.mp4" if protocol == "http" else "")
    time.sleep(2.0)  # the pipeline settled: the window measures streaming, not start-up
    stop = threading.Event()
    clients = [Client(url, stop) for _ in range(viewers)]
    time.sleep(2.0)  # clients connected and playing
    cpu0, wall0 = cpu_seconds(process.pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(process.pid) - cpu0) / (time.monotonic() - wall0)
    stop.set()
    process.send_signal(2)
    process.wait(60)
    for client in clients:
        client.thread.join(10)
    captured = capture_times(folder / "events.jsonl")
    latencies = [t - captured[s] for c in clients for s, t in c.seen if s in captured]
    rates = [len(c.seen) / (seconds + 2.0) for c in clients]
    return {
        "protocol": protocol,
        "viewers": viewers,
        "pipeline_cpu": round(cpu, 3),
        "latency_ms": spread([1000 * v for v in latencies]) if latencies else None,
        "pictures_per_viewer_s": round(harness.median(rates), 2) if rates else None,
        "errors": [c.error for c in clients if c.error],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--viewers", default="0,1,4,16")
    parser.add_argument("--protocols", default="rtsp,http")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "live_viewers.json"
    )
    args = parser.parse_args()
    counts = [int(v) for v in args.viewers.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        clip = Path(scratch) / "stamped.mp4"
        frames = round((len(counts) * 2 * (args.seconds + 10)) * 24) // len(counts) + 600
        stamped_clip(Path(os.environ.get("VAPIPE_ASSETS", REPO.parent / "shared"))
                     / "media" / "people.mp4", clip, min(frames, 4000))  # fmt: skip
        for protocol in args.protocols.split(","):
            for viewers in counts:
                folder = Path(scratch) / f"{protocol}-{viewers}"
                result = one_run(clip, folder, protocol, viewers, args.seconds, args.fps)
                results.append(result)
                print(json.dumps(result), flush=True)
    harness.record(args.out, {"fps": args.fps, "seconds": args.seconds, "runs": results})
    print(
        "\n| protocol | viewers | pipeline CPU (cores) | latency ms median (p95) | "
        "pictures/s per viewer |\n| --- | --- | --- | --- | --- |"
    )
    for r in results:
        lat = r["latency_ms"]
        shown = f"{lat['median']} ({lat['p95']})" if lat else "-"
        print(
            f"| {r['protocol']} | {r['viewers']} | {r['pipeline_cpu']} | {shown} | "
            f"{r['pictures_per_viewer_s'] or '-'} |"
        )


if __name__ == "__main__":
    main()
