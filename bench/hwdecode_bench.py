"""Decoding a 1080p H.264 clip in software and with ``hwaccel`` (the source node's option).

    python bench/hwdecode_bench.py --hwaccel cuda --out bench/results/hwdecode.json

Frames per second of decode plus conversion to BGR (what the source stage delivers), for one
stream and for N decoded side by side in threads, median of repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.streams_bench import make_clip  # noqa: E402


def decode(path: Path, hwaccel: str | None) -> int:
    kwargs: dict[str, Any] = {}
    if hwaccel:
        from av.codec.hwaccel import HWAccel

        kwargs["hwaccel"] = HWAccel(hwaccel, allow_software_fallback=False)
    frames = 0
    with av.open(str(path), **kwargs) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            frame.to_ndarray(format="bgr24")
            frames += 1
    return frames


def rate(path: Path, hwaccel: str | None, streams: int, repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        counts: list[int] = []
        threads = [
            threading.Thread(target=lambda out=counts: out.append(decode(path, hwaccel)))
            for _ in range(streams)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rates.append(sum(counts) / (time.perf_counter() - started))
    return round(statistics.median(rates), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hwaccel", default="cuda")
    parser.add_argument("--streams", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "bench/results/hwdecode.json"))
    args = parser.parse_args()
    from av.codec.hwaccel import hwdevices_available

    report: dict[str, Any] = {
        "command": "python bench/hwdecode_bench.py " + " ".join(sys.argv[1:]),
        "pyav": av.__version__,
        "device_types": hwdevices_available(),
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as scratch:
        clip = make_clip(Path(scratch) / "clip1080.mp4", 10.0)
        for streams in map(int, args.streams.split(",")):
            run: dict[str, Any] = {"streams": streams}
            for name, accel in (("software", None), (args.hwaccel, args.hwaccel)):
                try:
                    run[f"fps_{name}"] = rate(clip, accel, streams, args.repeats)
                except Exception as exc:
                    run[f"fps_{name}"] = f"{type(exc).__name__}: {exc}"
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
