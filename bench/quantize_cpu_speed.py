"""Model-only speed of float against INT8 copies on a machine's CPU, with onnxruntime alone
(no vapipe install needed): for comparing CPUs with and without AVX-512 VNNI / AVX-VNNI.

    python bench/quantize_cpu_speed.py FLOAT.onnx INT8.onnx [FLOAT2.onnx INT8_2.onnx ...] \
        --threads 1 2 4 --seconds 5 --runs 3 --output result.json

Each pair is timed on random inputs of the model's input shape, alternating float and INT8,
``--runs`` times per thread count, for ``--seconds`` each after a warm-up; median frames/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])  # fmt: skip
    return sorted(f for f in flags if "vnni" in f or f in ("avx2", "avx512f", "amx_int8"))


def model_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    return next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("model name")), platform.processor())  # fmt: skip


def fps(path: str, threads: int, seconds: float) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in first.shape]
    feed = {first.name: np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)}
    session.run(None, feed)
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        session.run(None, feed)
        done += 1
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="pairs: FLOAT.onnx INT8.onnx")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    rows = []
    for float_path, int8_path in zip(args.models[::2], args.models[1::2], strict=True):
        for threads in args.threads:
            speeds: dict[str, list[float]] = {"float": [], "int8": []}
            for _ in range(args.runs):
                speeds["float"].append(fps(float_path, threads, args.seconds))
                speeds["int8"].append(fps(int8_path, threads, args.seconds))
            row = {
                "float": Path(float_path).name,
                "int8": Path(int8_path).name,
                "threads": threads,
                "float_fps": round(statistics.median(speeds["float"]), 2),
                "int8_fps": round(statistics.median(speeds["int8"]), 2),
            }
            row["speedup"] = round(row["int8_fps"] / row["float_fps"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "benchmark": "model-only speed, float against INT8, onnxruntime CPU",
        "cpu": model_name(),
        "cpu_flags": cpu_flags(),
        "onnxruntime": ort.__version__,
        "runs": args.runs,
        "seconds": args.seconds,
        "rows": rows,
    }
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
