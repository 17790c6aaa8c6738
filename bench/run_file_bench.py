"""Naive single-thread loop vs run-pipeline on the same clip, alternating, several runs each.

    python bench/run_file_bench.py --runs 5

Writes bench/results/file_pipeline.json and prints a markdown table. Every side includes model
loading and container set-up in its wall time; fps = frames / wall. The naive loop runs twice
per round: with ONNX Runtime's defaults (what a plain script gets) and with the session option
the pipeline sets (no spinning intra-op threads); the ratio is taken against the faster one.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import onnxruntime as ort

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.naive import run as run_naive  # noqa: E402
from vapipe.pipeline import config, graph  # noqa: E402
from vapipe.pipeline.runner import Runner  # noqa: E402


def run_pipeline(config_path: Path, overrides: list[str], out_dir: Path) -> dict[str, float]:
    overrides = [
        *overrides,
        f"video.path={out_dir}/pipeline.mp4",
        f"events.path={out_dir}/pipeline.jsonl",
    ]
    started = time.perf_counter()
    built = graph.build(config.load(config_path, overrides))
    result = Runner(built).run(handle_signals=False)
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"pipeline failed: {result.error}")
    frames = result.stats["stages"]["events"]["frames"]
    return {"frames": frames, "wall_s": wall, "fps": frames / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--config", default=str(REPO / "configs/file.toml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--output", default=str(REPO / "bench/results/file_pipeline.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    naive, naive_nospin, piped = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.runs):
            # Interleave so that drift in machine load hits every side alike.
            naive.append(run_naive("sample:people", "yolox-nano", Path(tmp)))
            naive_nospin.append(run_naive("sample:people", "yolox-nano", Path(tmp), spinning=False))
            piped.append(run_pipeline(Path(args.config), args.overrides, Path(tmp)))
            print(
                f"run {index + 1}: naive {naive[-1]['fps']:.1f}, naive no-spin "
                f"{naive_nospin[-1]['fps']:.1f}, pipeline {piped[-1]['fps']:.1f} fps",
                file=sys.stderr,
            )
    default_fps = harness.median(r["fps"] for r in naive)
    nospin_fps = harness.median(r["fps"] for r in naive_nospin)
    naive_fps = max(default_fps, nospin_fps)
    pipe_fps = harness.median(r["fps"] for r in piped)
    result = {
        "benchmark": "file pipeline vs naive loop, people.mp4 (460 frames, 800x450), YOLOX-Nano",
        "command": "python bench/run_file_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
        },
        "runs": args.runs,
        "naive_fps": [round(r["fps"], 2) for r in naive],
        "naive_nospin_fps": [round(r["fps"], 2) for r in naive_nospin],
        "pipeline_fps": [round(r["fps"], 2) for r in piped],
        "naive_median_fps": round(default_fps, 2),
        "naive_nospin_median_fps": round(nospin_fps, 2),
        "pipeline_median_fps": round(pipe_fps, 2),
        "ratio": round(pipe_fps / naive_fps, 3),
        "ratio_vs_onnxruntime_defaults": round(pipe_fps / default_fps, 3),
        "overrides": args.overrides,
    }
    harness.record(Path(args.output), result)
    print("| side | median fps | runs |\n| --- | --- | --- |")
    print(
        f"| naive loop, ORT defaults | {default_fps:.1f} | "
        f"{', '.join(f'{r:.1f}' for r in result['naive_fps'])} |"
    )
    print(
        f"| naive loop, no spinning | {nospin_fps:.1f} | "
        f"{', '.join(f'{r:.1f}' for r in result['naive_nospin_fps'])} |"
    )
    print(
        f"| run-pipeline | {pipe_fps:.1f} | "
        f"{', '.join(f'{r:.1f}' for r in result['pipeline_fps'])} |"
    )
    print(f"\nratio pipeline / faster naive: {result['ratio']:.2f}x")


if __name__ == "__main__":
    main()
