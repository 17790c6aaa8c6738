"""Float against INT8 (three choices of what stays float) and FP16 copies made by
``run-pipeline models quantize``, for YOLOX-Nano and YOLOv8n on this machine.

    python bench/quantize_bench.py --runs 3 --frames 200

Each copy is calibrated on people.mp4 (every 5th of the frames taken held out). Agreement
with the float model: the share of its detections matched (same class, IoU >= 0.5) on those
held-out frames and on the first 40 frames of traffic.mp4 and horses.mp4, never calibrated
on. Speed: frames/s of configs/file.toml on the whole of people.mp4 (stats ``wall_s``), float
and copy alternating, median of ``--runs``. Writes bench/results/quantize.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness
from vapipe.pipeline import assets
from vapipe.quantize.calibration import compare, open_model, take_frames
from vapipe.quantize.quantize import quantize

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
VARIANTS = [  # precision, what stays float, how activation ranges are set
    ("int8", "sensitive", "minmax"),
    ("int8", "head", "percentile"),
    ("int8", "head", "minmax"),
    ("int8", "tail", "minmax"),
    ("int8", "none", "minmax"),
    ("fp16", "-", "-"),
]
OTHER_CLIPS = ("traffic", "horses")


def pipeline_fps(model: Path, cwd: Path) -> float:
    stats = cwd / "stats.json"
    command = [sys.executable, "-m", "vapipe", str(REPO / "configs" / "file.toml")]
    command += ["--set", f"det.model={model}", "--stats", str(stats), "--log-level", "warning"]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{model}: exit {done.returncode}: {done.stderr[-800:]}")
    shown = json.loads(stats.read_text())
    return float(shown["stages"]["events"]["frames"] / shown["wall_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--models", nargs="+", default=["yolox-nano", "yolov8n"])
    parser.add_argument(
        "--variants", nargs="+", metavar="TO/KEEP/RANGES",
        help="only these (e.g. int8/sensitive/minmax), their rows merged into the last report",
    )  # fmt: skip
    args = parser.parse_args()
    variants = [v for v in VARIANTS if not args.variants or "/".join(v) in args.variants]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in args.models:
            assets.prepare([assets.Needed("models", model, "bench")])
            float_model = assets.resolve_model(model)
            unseen = unseen_frames(float_model)
            copies = {}
            for to, keep, method in variants:
                target = work / f"{model}_{to}_{keep}_{method}.onnx"
                _, facts = quantize(
                    model, "sample:people", to=to, output=target, frames=args.frames,
                    keep_float=keep if keep != "-" else "head",
                    method=method if method != "-" else "minmax",
                )  # fmt: skip
                copies[(to, keep, method)] = (target, facts)
            speeds: dict[str, list[float]] = {"float": []}
            for _ in range(args.runs):
                speeds["float"].append(pipeline_fps(float_model, work))
                for variant, (target, _) in copies.items():
                    speeds.setdefault("/".join(variant), []).append(pipeline_fps(target, work))
            float_fps = harness.median(speeds["float"])
            for (to, keep, method), (target, facts) in copies.items():
                fps = harness.median(speeds[f"{to}/{keep}/{method}"])
                agreed = {
                    clip: compare(str(float_model), str(target), frames, measure_speed=False)
                    for clip, frames in unseen.items()
                }
                rows.append({
                    "model": model, "precision": to, "kept_float": keep, "ranges": method,
                    "size_mb": round(target.stat().st_size / 2**20, 2),
                    "matched_people_held_out": facts["agreement"]["matched"],
                    "mean_score_change": facts["agreement"]["mean_score_change"],
                    "nodes_kept_float": facts["int8"]["nodes_kept_float"] if to == "int8" else 0,
                    **{f"matched_{clip}": agreed[clip]["matched"] for clip in OTHER_CLIPS},
                    "model_fps": facts["agreement"]["fps"],
                    "model_float_fps": facts["agreement"]["float_fps"],
                    "pipeline_fps": round(fps, 2),
                    "pipeline_float_fps": round(float_fps, 2),
                    "pipeline_speedup": round(fps / float_fps, 3),
                    "runs_fps": [round(v, 2) for v in speeds[f"{to}/{keep}/{method}"]],
                    "runs_float_fps": [round(v, 2) for v in speeds["float"]],
                })  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    if args.variants:  # the other rows as last measured
        measured = {(r["model"], r["precision"], r["kept_float"], r["ranges"]) for r in rows}
        earlier = json.loads((RESULTS / "quantize.json").read_text())["rows"]
        rows = [r for r in earlier
                if (r["model"], r["precision"], r["kept_float"], r["ranges"]) not in measured
                ] + rows  # fmt: skip
    result = {
        "benchmark": "models quantize: float against INT8 and FP16 copies",
        "command": f"python bench/quantize_bench.py --runs {args.runs} --frames {args.frames}"
        + (f" --variants {' '.join(args.variants)}" if args.variants else ""),
        "calibration": f"sample:people, {args.frames} frames, every 5th held out",
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "rows": rows,
    }
    harness.record((RESULTS / "quantize.json"), result)
    (RESULTS / "quantize.md").write_text(markdown(result))
    print(markdown(result))


def unseen_frames(float_model: Path) -> dict[str, list[Any]]:
    """The first 40 frames of each other clip, preprocessed for the model (none of them
    calibrated on: the held-out split is only how take_frames is used for calibration)."""
    infer = open_model(str(float_model))
    try:
        taken = {}
        for clip in OTHER_CLIPS:
            sample = take_frames(f"sample:{clip}", infer, 40)
            taken[clip] = sample.frames
        return taken
    finally:
        infer.close()


def kept(row: dict[str, Any]) -> str:
    if row["kept_float"] == "sensitive":
        return f"sensitive ({row.get('nodes_kept_float', '?')} nodes)"
    return str(row["kept_float"])


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# models quantize: float against INT8 and FP16",
        "",
        f"`{result['command']}` on {result['cpus']} cores. Calibrated on "
        f"{result['calibration']}. Matched: share of the float model's detections the copy "
        "also finds (same class, IoU >= 0.5). Pipeline: configs/file.toml on people.mp4, "
        "median frames/s.",
        "",
        "| model | precision | kept float | ranges | MB | matched people (held out) | traffic "
        "| horses | mean score change | model fps (float) | pipeline fps (float) | speed-up |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['model']} | {r['precision']} | {kept(r)} | {r['ranges']} "
            f"| {r['size_mb']} "
            f"| {r['matched_people_held_out']} | {r['matched_traffic']} | {r['matched_horses']} "
            f"| {r['mean_score_change']} | {r['model_fps']} ({r['model_float_fps']}) "
            f"| {r['pipeline_fps']} ({r['pipeline_float_fps']}) | {r['pipeline_speedup']}x |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
