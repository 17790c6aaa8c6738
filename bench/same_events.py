"""people.mp4 through the CLI with CUDA graphs on and off, or with torch and OpenCL
preprocessing on the GPU: are the detections the same?

    python bench/same_events.py --out bench/results/streams/cuda_graphs_same_events.json
    python bench/same_events.py --compare pre --out bench/results/streams/torch_pre_same_events.json

Needs torch with a GPU and an OpenCL GPU platform (see bench/gpu_bench.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIG = """\
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "sample:people"
[nodes.pre]
type = "preprocess"
{pre}
[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 8
workers = 2
[nodes.det.backend]
type = "torch"
device = "cuda"
cuda_graphs = {graphs}
[nodes.nms]
type = "nms"
[nodes.events]
type = "events"
path = "{events}"
"""


OPENCL = 'backend = "opencl"\ndevice = "gpu"'


def frame_events(name: str, work: Path, graphs: str = "true", pre: str = OPENCL) -> dict[int, dict]:
    folder = work / name
    folder.mkdir()
    config = folder / "pipeline.toml"
    config.write_text(CONFIG.format(graphs=graphs, pre=pre, events=folder / "events.jsonl"))
    command = [sys.executable, "-m", "vapipe", str(config), "--no-progress"]
    subprocess.run(command, check=True, capture_output=True, text=True)
    lines = (folder / "events.jsonl").read_text().splitlines()
    events = (json.loads(line) for line in lines)
    return {e["seq"]: e for e in events if e.get("event") == "frame"}


def box_difference(a: dict, b: dict) -> float | None:
    """Largest coordinate difference, or None when the detections differ in number or class."""
    first, second = a["detections"], b["detections"]
    if len(first) != len(second) or any(
        x["class_id"] != y["class_id"] for x, y in zip(first, second, strict=True)
    ):
        return None
    pairs = (
        (u, v)
        for x, y in zip(first, second, strict=True)
        for u, v in zip(x["xyxy"], y["xyxy"], strict=True)
    )
    return max((abs(u - v) for u, v in pairs), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="same_events.json")
    parser.add_argument("--compare", choices=("graphs", "pre"), default="graphs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.compare == "graphs":
            graphed = frame_events("graphs_true", Path(scratch))
            eager = frame_events("graphs_false", Path(scratch), graphs="false")
        else:  # the names stay: first torch preprocessing, then OpenCL's
            graphed = frame_events("torch_pre", Path(scratch), pre='backend = "torch"')
            eager = frame_events("opencl_pre", Path(scratch))
    differences = [box_difference(a, eager[seq]) for seq, a in graphed.items() if seq in eager]
    result = {
        "compare": args.compare,
        "frames": [len(graphed), len(eager)],
        "frames_identical": sum(
            a["detections"] == eager[seq]["detections"]
            for seq, a in graphed.items()
            if seq in eager
        ),
        "frames_same_within_half_pixel": sum(d is not None and d <= 0.5 for d in differences),
        "max_box_diff_px_of_matching": max((d for d in differences if d is not None), default=0),
    }
    print(result)
    Path(args.out).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
