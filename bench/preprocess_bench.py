"""Preprocessing throughput: the OpenCL kernel (here PoCL's CPU device) against the numpy path.

    python bench/preprocess_bench.py --runs 5

Frames are real (people.mp4 at its native 800x450, and the same frames resized to 1920x1080);
each run converts 100 frames to a YOLOX 416 tensor and to an Ultralytics 640 tensor; we report
the median frames per second over the runs. OpenCL goes through the frame-by-frame ring
(submit/result, two frames in flight), as the pipeline stage uses it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import av
import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline.assets import resolve_media  # noqa: E402
from vapipe.pipeline.stage import StageContext  # noqa: E402
from vapipe.stages.preprocess.cl_kernel import TensorSpec  # noqa: E402
from vapipe.stages.preprocess.opencl import OpenCLLetterbox  # noqa: E402
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage  # noqa: E402

SETTINGS = {
    "yolox-416": dict(size=416, placement="top-left", color="bgr", scale=1.0),
    "ultralytics-640": dict(size=640, placement="center", color="rgb", scale=1 / 255),
}


def load_frames(count: int) -> list[np.ndarray]:
    with av.open(resolve_media("sample:people")) as container:
        decoded = (f.to_ndarray(format="bgr24") for f in container.decode(video=0))
        return [image for _, image in zip(range(count), decoded, strict=False)]


def numpy_fps(frames: list[np.ndarray], setting: dict) -> float:
    stage = PreprocessStage(
        "pre",
        PreprocessConfig(
            input_size=[setting["size"]] * 2,
            placement=setting["placement"],
            color=setting["color"],
            scale=setting["scale"],
        ),
    )
    stage.open(StageContext("pre"))
    started = time.perf_counter()
    for image in frames:
        stage.tensor(image)
    return len(frames) / (time.perf_counter() - started)


def opencl_fps(frames: list[np.ndarray], setting: dict, ring: OpenCLLetterbox) -> float:
    started = time.perf_counter()
    pending = []
    for image in frames:
        pending.append(ring.submit([image]))
        if len(pending) == 2:
            ring.result(pending.pop(0))
    for item in pending:
        ring.result(item)
    return len(frames) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--output", default=str(REPO / "bench/results/preprocess.json"))
    args = parser.parse_args()
    native = load_frames(args.frames)
    sizes = {
        "800x450": native,
        "1920x1080": [cv2.resize(f, (1920, 1080), interpolation=cv2.INTER_LINEAR) for f in native],
    }
    rows = []
    for size_name, frames in sizes.items():
        for name, setting in SETTINGS.items():
            conv = TensorSpec(
                setting["size"],
                setting["size"],
                setting["placement"],
                setting["color"] == "rgb",
                setting["scale"],
            )
            ring = OpenCLLetterbox(conv, device="auto")
            opencl_fps(frames[:4], setting, ring)  # build, allocate, warm up
            numpy_runs, opencl_runs = [], []
            for _ in range(args.runs):
                numpy_runs.append(numpy_fps(frames, setting))
                opencl_runs.append(opencl_fps(frames, setting, ring))
            rows.append(
                {
                    "frame": size_name,
                    "tensor": name,
                    "numpy_fps": round(harness.median(numpy_runs), 1),
                    "opencl_fps": round(harness.median(opencl_runs), 1),
                    "opencl_over_numpy": round(
                        harness.median(opencl_runs) / harness.median(numpy_runs), 2
                    ),
                    "opencl_device": ring.program.describe(),
                }
            )
            print(rows[-1], file=sys.stderr)
    report = {
        "command": "python bench/preprocess_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "runs": args.runs,
        "frames": args.frames,
        "results": rows,
    }
    harness.record(Path(args.output), report)
    print("| frame | tensor | numpy fps | OpenCL fps | ratio |\n| --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['frame']} | {row['tensor']} | {row['numpy_fps']} | {row['opencl_fps']} | "
            f"{row['opencl_over_numpy']} |"
        )


if __name__ == "__main__":
    main()
