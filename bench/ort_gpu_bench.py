"""ONNX Runtime's CUDA provider: the backend alone and inside the pipeline, against the CPU.

    python bench/ort_gpu_bench.py --out bench/results/ort_gpu.json

Needs an onnxruntime build with CUDAExecutionProvider. Measures (YOLOX-Nano, people.mp4):
load time (fixed batch shapes warmed, output checked against the CPU); the backend alone at
batch 1, 8 and 32 with host copies (median of repeats); ``configs/file.toml`` with
``providers = ["cuda"]`` and with ``["cpu"]`` at max_batch 8: the infer stage's fps, mean and
p95 ms per frame, and how many frames have the same detections as the CPU run (same count,
classes, boxes within 1 px).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402


def standalone(repeats: int) -> dict[str, Any]:
    from vapipe.pipeline.assets import resolve_model
    from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig

    started = time.monotonic()
    backend = OnnxBackend(
        str(resolve_model("yolox-nano")),
        name="det",
        config=OnnxRuntimeConfig(providers=["cuda"]),
        max_batch=32,
    )
    result: dict[str, Any] = {
        "device": backend.device,
        "load_s": round(time.monotonic() - started, 2),
        "batch_sizes": backend.batch_sizes,
        "max_rel_error_vs_cpu": backend.max_error,
        "node_placement": backend.placement,
    }
    for batch in (1, 8, 32):
        data = np.random.default_rng(batch).random((batch, 3, 416, 416), dtype=np.float32) * 255
        backend.run(data)
        rates = []
        for _ in range(repeats):
            begun = time.perf_counter()
            for _ in range(5):
                backend.run(data)
            rates.append(5 * batch / (time.perf_counter() - begun))
        result[f"fps_batch_{batch}"] = round(harness.median(rates), 1)
    return result


def pipeline(provider: str, folder: Path) -> dict[str, Any]:
    events = folder / f"{provider}.jsonl"
    stats = folder / f"{provider}.json"
    started = time.monotonic()
    process = subprocess.run(
        [sys.executable, "-m", "vapipe", str(REPO / "configs/file.toml"),
         "--set", f"det.backend.providers=['{provider}']", "--set", "det.max_batch=8",
         "--set", "det.workers=2", "--set", "det.backend.threads=0",
         "--set", f"events.path={events}", "--set", f"video.path={folder}/{provider}.mp4",
         "--stats", str(stats), "--no-progress"],
        capture_output=True, text=True, check=False, cwd=folder,
    )  # fmt: skip
    if process.returncode != 0:
        return {"error": process.stderr[-1500:]}
    det = json.loads(stats.read_text())["stages"]["det"]
    return {
        "wall_s": round(time.monotonic() - started, 2),
        "infer_fps": det["fps"],
        "infer_mean_ms_per_frame": det["mean_ms"],
        "infer_p95_ms_per_frame": det["p95_ms"],
        "provider": det.get("provider"),
        "events": str(events),
    }


def same_detections(a: Path, b: Path) -> tuple[int, int]:
    def frames(path: Path) -> dict[int, list[dict]]:
        return {
            e["seq"]: e["detections"]
            for e in map(json.loads, path.read_text().splitlines())
            if e["event"] == "frame"
        }

    first, second = frames(a), frames(b)
    same = 0
    for seq, dets in first.items():
        other = second.get(seq, [])
        if len(dets) == len(other) and all(
            x["class_id"] == y["class_id"]
            and max(abs(p - q) for p, q in zip(x["xyxy"], y["xyxy"], strict=True)) <= 1.0
            for x, y in zip(dets, other, strict=True)
        ):
            same += 1
    return same, len(first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "bench/results/ort_gpu.json"))
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    import onnxruntime

    report: dict[str, Any] = {
        "command": "python bench/ort_gpu_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "onnxruntime": onnxruntime.__version__,
        "providers": onnxruntime.get_available_providers(),
    }
    try:
        report["standalone"] = standalone(args.repeats)
    except Exception as exc:
        report["standalone"] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(report, indent=1), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for provider in ("cuda", "cpu"):
            report[f"pipeline_{provider}"] = pipeline(provider, folder)
            print(json.dumps({provider: report[f"pipeline_{provider}"]}), flush=True)
        runs = [report.get(f"pipeline_{p}", {}) for p in ("cuda", "cpu")]
        if all("events" in run for run in runs):
            same, total = same_detections(Path(runs[0]["events"]), Path(runs[1]["events"]))
            report["frames_with_cpu_detections"] = f"{same} of {total}"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    harness.record(Path(args.out), report)
    print(json.dumps({k: report.get(k) for k in ("frames_with_cpu_detections",)}), flush=True)


if __name__ == "__main__":
    main()
