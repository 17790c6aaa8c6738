"""Recording 1080p in real time: x264's levers, one at a time, for 1, 4 and 16 encoders at once.

    python bench/encoder_bench.py --out bench/results/encoder.json       # on the GPU host
    python bench/encoder_bench.py --concurrency 1,2 --frames 60          # this 2-core machine

What the video sink does today is the first row: an annotated BGR picture handed to PyAV as
``bgr24``, converted to yuv420p by swscale inside the encoder call, x264 ``veryfast`` at CRF
23 with its own threads. Each other row changes one thing: OpenCV's BGR-to-I420 conversion
before the encoder (what the OpenCL/numpy paths use the other way round), a faster preset,
``tune=zerolatency`` (no frame look-ahead, sliced threads), a fixed thread count. Each
encoder runs in its own process, as shards do, on the same frames (people.mp4 at 1080p,
decoded once); reported per encoder: frames/s (encode calls only, the container's muxing
included) and bytes per frame, the size cost of a faster setting. Medians over --runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402

LEVERS: list[dict[str, Any]] = [
    {"name": "today: bgr24 via swscale, veryfast", "convert": "swscale", "preset": "veryfast"},
    {"name": "OpenCV BGR->I420, veryfast", "convert": "opencv", "preset": "veryfast"},
    {"name": "bgr24, superfast", "convert": "swscale", "preset": "superfast"},
    {"name": "bgr24, ultrafast", "convert": "swscale", "preset": "ultrafast"},
    {"name": "bgr24, veryfast, zerolatency", "convert": "swscale", "preset": "veryfast",
     "tune": "zerolatency"},
    {"name": "bgr24, veryfast, threads 4", "convert": "swscale", "preset": "veryfast",
     "threads": 4},
    {"name": "OpenCV, superfast", "convert": "opencv", "preset": "superfast"},
    {"name": "OpenCV, superfast, zerolatency", "convert": "opencv", "preset": "superfast",
     "tune": "zerolatency"},
]  # fmt: skip


def frames_1080p(count: int) -> np.ndarray:
    from vapipe.pipeline.assets import resolve_media

    pictures = []
    with av.open(resolve_media("sample:people")) as source:
        for frame in source.decode(video=0):
            image = frame.to_ndarray(format="bgr24")
            pictures.append(cv2.resize(image, (1920, 1080), interpolation=cv2.INTER_LINEAR))
            if len(pictures) == count:
                break
    return np.stack(pictures)


def encode(args: tuple[dict[str, Any], str, int, int]) -> dict[str, float]:
    lever, frames_path, total, index = args
    pictures = np.load(frames_path, mmap_mode="r")
    rate = Fraction(24000, 1001)
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / f"{index}.mp4"
        with av.open(str(target), "w") as out:
            stream = out.add_stream("libx264", rate=rate)
            stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
            options = {"preset": lever["preset"], "crf": "23"}
            if lever.get("tune"):
                options["tune"] = lever["tune"]
            stream.options = options
            if lever.get("threads"):
                stream.codec_context.thread_count = lever["threads"]
            started = time.perf_counter()
            for count in range(total):
                image = np.ascontiguousarray(pictures[count % len(pictures)])
                if lever["convert"] == "opencv":
                    planes = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420)
                    frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
                else:
                    frame = av.VideoFrame.from_ndarray(image, format="bgr24")
                frame.pts, frame.time_base = count, 1 / rate
                out.mux(stream.encode(frame))
            out.mux(stream.encode(None))
            spent = time.perf_counter() - started
        size = target.stat().st_size
    return {"fps": total / spent, "bytes_per_frame": size / total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--frames", type=int, default=240, help="encoded per encoder")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--levers", help="indices into the table, e.g. 0,1,2 (default: all)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    chosen = [LEVERS[int(i)] for i in args.levers.split(",")] if args.levers else LEVERS
    with tempfile.TemporaryDirectory() as folder:
        frames_path = str(Path(folder) / "frames.npy")
        np.save(frames_path, frames_1080p(48))
        rows = []
        context = multiprocessing.get_context("spawn")
        for concurrency in map(int, args.concurrency.split(",")):
            with context.Pool(concurrency) as pool:
                for lever in chosen:
                    runs = []
                    for _ in range(args.runs):
                        jobs = [(lever, frames_path, args.frames, i) for i in range(concurrency)]
                        results = pool.map(encode, jobs)
                        runs.append(harness.median(r["fps"] for r in results))
                    row = {
                        "lever": lever["name"], "encoders": concurrency,
                        "fps_per_encoder": round(harness.median(runs), 1),
                        "aggregate_fps": round(harness.median(runs) * concurrency, 1),
                        "bytes_per_frame": round(results[0]["bytes_per_frame"]),
                    }  # fmt: skip
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    report = {"command": " ".join(sys.argv), "cores": multiprocessing.cpu_count(), "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.record(args.out, report)


if __name__ == "__main__":
    main()
