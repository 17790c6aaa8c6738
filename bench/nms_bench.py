"""The nms node's NMS: OpenCV's batched NMS against the numpy loop it replaced, on random
boxes of 80 classes like a YOLO head's candidates at a low score threshold.

    python bench/nms_bench.py --runs 7

Per box count: median time of each (alternating, ``--runs`` rounds of ``--repeat`` calls),
the ratio, and whether both kept the same boxes. Writes bench/results/nms.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness
from vapipe.stages.nms import nms_numpy, nms_opencv

RESULTS = Path(__file__).resolve().parent / "results"


def boxes(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 640, (count, 2))
    sizes = rng.uniform(8, 160, (count, 2))
    xyxy = np.concatenate((centres - sizes / 2, centres + sizes / 2), 1).astype(np.float32)
    return xyxy, rng.uniform(0.01, 1, count).astype(np.float32), rng.integers(0, 80, count)


def timed(function: object, args: tuple, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        function(*args)  # type: ignore[operator]
    return (time.perf_counter() - started) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--counts", type=int, nargs="+", default=[100, 500, 3000])
    args = parser.parse_args()
    rows = []
    for count in args.counts:
        xyxy, score, ids = boxes(count, count)
        call = (xyxy, score, 0.45, ids)
        same = nms_opencv(*call).tolist() == nms_numpy(*call).tolist()
        times: dict[str, list[float]] = {"numpy": [], "opencv": []}
        for _ in range(args.runs):
            times["numpy"].append(timed(nms_numpy, call, args.repeat))
            times["opencv"].append(timed(nms_opencv, call, args.repeat))
        numpy_ms = harness.median(times["numpy"]) * 1e3
        opencv_ms = harness.median(times["opencv"]) * 1e3
        rows.append({
            "boxes": count,
            "kept": len(nms_opencv(*call)),
            "same_kept": same,
            "numpy_ms": round(numpy_ms, 3),
            "opencv_ms": round(opencv_ms, 3),
            "numpy_over_opencv": round(numpy_ms / opencv_ms, 1),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    result = {
        "benchmark": "nms: OpenCV's batched NMS against the numpy loop, class-aware, IoU 0.45",
        "command": f"python bench/nms_bench.py --runs {args.runs}",
        "cpus": os.cpu_count(),
        "rows": rows,
    }
    harness.record((RESULTS / "nms.json"), result)
    lines = [
        "# nms: OpenCV against the numpy loop",
        "",
        f"`{result['command']}` on {result['cpus']} cores; random boxes of 80 classes, "
        "median per call.",
        "",
        "| boxes | kept | same kept | numpy ms | OpenCV ms | numpy / OpenCV |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {r['boxes']} | {r['kept']} | {r['same_kept']} | {r['numpy_ms']} "
            f"| {r['opencv_ms']} | {r['numpy_over_opencv']}x |"
            for r in rows
        ),
    ]
    (RESULTS / "nms.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
