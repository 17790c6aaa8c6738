"""What redaction costs: configs/faces.toml as it is (people, faces found inside them, named,
blurred before the annotated video) against the same graph without its ``redact`` node
(``faceid ! video``), on the people clip looped, run alternately in one call; fps = frames /
wall time. Also the redact node's own time per frame from the run's stats, for each
``--method``.

``--graph gpu`` times the other shape instead: configs/gpu.toml on the people clip with every
person hidden (``nms ! redact ! video``) against it without the node. Nothing before the node
asks for host pixels there, so with ``--set cam.hwaccel=nvdec`` the pictures are redacted in
GPU memory (the run's ``on_device`` count says so).

    python bench/redaction_cost.py --runs 5 --seconds 20 [--label cpu] [--set KEY=VALUE ...]

Writes bench/results/redaction_cost.json (under ``--label``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

REPO = Path(__file__).resolve().parent.parent
FACES = REPO / "configs" / "faces.toml"
GPU = REPO / "configs" / "gpu.toml"
RATE = 24000 / 1001  # people.mp4
REDACTED = "faceid ! redact ! video"


def plain_config(folder: Path) -> Path:
    """faces.toml with its pictures not redacted (the redact node left out of the links)."""
    text = FACES.read_text(encoding="utf-8")
    assert REDACTED in text, "configs/faces.toml's links changed: update this bench"
    text = text.replace(REDACTED, "faceid ! video")
    start = text.index("[nodes.redact]")
    end = text.index("[nodes.video]")
    path = folder / "plain.toml"
    path.write_text(text[:start] + text[end:], encoding="utf-8")
    return path


def gpu_configs(folder: Path) -> tuple[Path, Path]:
    """configs/gpu.toml on the people clip, without and with every person redacted."""
    text = GPU.read_text(encoding="utf-8")
    links = 'links = ["cam ! pre ! det ! nms ! video", "nms ! events"]'
    assert links in text, "configs/gpu.toml's links changed: update this bench"
    text = text.replace("sample:traffic", "sample:people")
    plain = folder / "gpu-plain.toml"
    plain.write_text(text, encoding="utf-8")
    redacted = folder / "gpu-redacted.toml"
    redacted.write_text(
        text.replace(links, 'links = ["cam ! pre ! det ! nms ! redact ! video", "nms ! events"]')
        + '\n[nodes.redact]\ntype = "redact"\nclasses = ["person"]\n',
        encoding="utf-8",
    )
    return plain, redacted


def run(config: Path, frames: int, folder: Path, sets: list[str]) -> dict[str, float]:
    stats = folder / "stats.json"
    command = [
        sys.executable,
        "-m",
        "vapipe",
        str(config),
        "--set",
        "cam.loop=true",
        "--max-frames",
        str(frames),
        "--stats",
        str(stats),
        "--log-level",
        "warning",
    ]
    for item in sets:
        command += ["--set", item]
    subprocess.run(command, cwd=folder, check=True, capture_output=True, text=True)
    result = json.loads(stats.read_text())
    redact = result["stages"].get("redact", {})
    return {
        "fps": frames / result["wall_s"],
        "wall_s": result["wall_s"],
        "redact_mean_ms": redact.get("mean_ms"),
        "regions": redact.get("regions"),
        "whole_objects": redact.get("whole_objects"),
        "on_device": redact.get("on_device"),
        "det": {k: v for k, v in result["stages"]["det"].items() if k in ("provider", "backend")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0, help="of video per run")
    parser.add_argument("--label", default="cpu", help="the key the results go under")
    parser.add_argument("--graph", choices=("faces", "gpu"), default="faces")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        dest="sets",
        help="NODE.KEY=VALUE for both graphs (e.g. det.backend=torch)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / "redaction_cost.json"
    )
    args = parser.parse_args()
    frames = round(args.seconds * RATE)
    names = ("plain", "blur", "pixelate", "fill")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as scratch:
        if args.graph == "faces":
            plain, redacted = plain_config(Path(scratch)), FACES
        else:
            plain, redacted = gpu_configs(Path(scratch))
        for index in range(args.runs):
            for name in names:
                folder = Path(scratch) / f"{name}-{index}"
                folder.mkdir()
                config, sets = (
                    (plain, args.sets)
                    if name == "plain"
                    else (redacted, [*args.sets, f"redact.method={name}"])
                )
                runs[name].append(run(config, frames, folder, sets))
                print(f"run {index + 1} {name}: {runs[name][-1]['fps']:.1f} fps", flush=True)
    medians = {name: harness.median(r["fps"] for r in runs[name]) for name in names}
    ratios = {
        name: [r["fps"] / p["fps"] for p, r in zip(runs["plain"], runs[name], strict=True)]
        for name in names[1:]
    }
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "graph": args.graph,
        "sets": args.sets,
        "video_s_per_run": args.seconds,
        "frames_per_run": frames,
        "runs": runs,
        "median_fps": {name: round(value, 1) for name, value in medians.items()},
        "ratio_median": {name: round(harness.median(r), 3) for name, r in ratios.items()},
        "redact_ms_median": {
            name: round(harness.median(r["redact_mean_ms"] for r in runs[name]), 2)
            for name in names[1:]
        },
    }
    everything = json.loads(args.out.read_text()) if args.out.exists() else {}
    everything[args.label] = result
    args.out.write_text(json.dumps(everything, indent=2) + "\n")
    print("\n| graph | median fps | ratio | redact ms/frame |\n| --- | --- | --- | --- |")
    print(f"| {args.graph} graph without redact | {medians['plain']:.1f} | 1.00 | - |")
    for name in names[1:]:
        print(
            f"| + redact ({name}) | {medians[name]:.1f} | {result['ratio_median'][name]:.3f} "
            f"| {result['redact_ms_median'][name]:.2f} |"
        )


if __name__ == "__main__":
    main()
