"""Start-up: seconds from launching ``run-pipeline`` to its first event, with the torch
backend's compiled-model cache off, cold (an empty cache folder) and warm (filled by an
earlier run), and with onnxruntime, in fresh processes.

    python bench/startup_bench.py --streams 1,16 --shards 1,8 --runs 3 \\
        --out bench/results/startup.json                          # GPU machine: torch on CUDA
    python bench/startup_bench.py --device cpu --streams 1 --shards 1 --runs 5 \\
        --out bench/results/startup_cpu.json                      # this 2-core CPU

Each run reads N copies of a short clip (people.mp4 at 1080p on the GPU machine, as
bench/streams_bench.py makes it) through preprocess, infer (YOLOX-Nano, max_batch 8), nms and
an events file, 24 frames per stream. Reported per run: launch to the first line of the
events file (the user's "first event"), launch to exit, and from ``--stats`` each shard's
launch-to-ready and the model's own phases (import, device, cache load, convert, check,
trace, capture). Medians over the runs; the variants alternate run by run so that a drift
of the machine falls on all of them.

Two builds side by side (each a ``pip install --no-deps --target SITE`` of a wheel, as for
bench/compare_builds.py): ``--builds before=/tmp/a-site,after=/tmp/b-site``; every variant then
runs once per build in turn and is reported as ``variant@build``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import harness  # noqa: E402

CONFIG = """\
links = [{links}, "pre ! det ! nms ! events"]

[pipeline]
shards = {shards}

{sources}
[nodes.pre]
type = "preprocess"
{pre}

[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 8
batch_timeout_ms = 10

[nodes.det.backend]
{backend}

[nodes.nms]
type = "nms"

[nodes.events]
type = "events"
path = "{events}"
"""


def write_config(folder: Path, clip: str, streams: int, shards: int, backend: str,
                 pre: str) -> Path:  # fmt: skip
    names = [f"cam{i:02d}" for i in range(streams)]
    sources = "".join(f'[nodes.{n}]\ntype = "source"\nuri = "{clip}"\n\n' for n in names)
    path = folder / "pipeline.toml"
    path.write_text(
        CONFIG.format(
            links=", ".join(f'"{n} ! pre"' for n in names),
            shards=shards,
            sources=sources,
            pre=pre,
            backend=backend,
            events=folder / "events.jsonl",
        )
    )
    return path


def backend_table(variant: str, device: str, cache: Path) -> str:
    if variant == "onnxruntime":
        return 'type = "onnxruntime"'
    setting = "off" if variant == "off" else str(cache)
    return f'type = "torch"\ndevice = "{device}"\ncache_dir = "{setting}"'


def one_run(folder: Path, config: Path, frames: int, site: str | None = None) -> dict[str, Any]:
    events, stats = folder / "events.jsonl", folder / "stats.json"
    for path in (events, stats):
        path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "vapipe", str(config), "--stats", str(stats),
               "--max-frames", str(frames), "--no-progress", "--log-level", "warning"]  # fmt: skip
    launched = time.monotonic()
    env = {**os.environ, "PYTHONPATH": site} if site else None
    process = subprocess.Popen(command, cwd=folder, stderr=subprocess.PIPE, text=True, env=env)
    first = None
    while process.poll() is None and first is None:
        if events.exists() and events.stat().st_size > 0:
            first = time.monotonic() - launched
            break
        time.sleep(0.005)
    _, errors = process.communicate(timeout=600)
    total = time.monotonic() - launched
    if process.returncode != 0:
        raise SystemExit(f"run failed ({process.returncode}): {errors[-2000:]}")
    if first is None and events.exists() and events.stat().st_size > 0:
        first = total  # the whole run fitted between two polls
    report = json.loads(stats.read_text())
    shards = report.get("shards") or [report]
    dets = [s.get("stages", {}).get("det", {}) for s in shards]
    model = [{**d.get("startup", {}), "cuda_graphs": d.get("cuda_graphs")} for d in dets]
    ready = [s.get("startup", {}).get("to_ready_s") for s in shards]
    return {
        "first_event_s": round(first, 3) if first is not None else None,
        "exit_s": round(total, 3),
        "shard_ready_s": ready,
        "model": model,
    }


def timeline(folder: Path, config: Path, frames: int) -> list[str]:
    """One more run with the debug log: each line's seconds after launch, to see what the
    start-up waits for."""
    from datetime import datetime

    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vapipe", str(config), "--max-frames",
         str(frames), "--no-progress", "--log-level", "debug", "--log-format", "json"],
        cwd=folder, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    lines, imports = [], []
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            parts = line.split("|")  # self us | cumulative us | name
            if len(parts) == 3 and parts[1].strip().isdigit():
                imports.append((int(parts[1]), parts[2].rstrip()))
            continue
        try:
            record = json.loads(line)
            at = datetime.fromisoformat(record["time"]).timestamp() - launched
            lines.append(f"{at:7.3f} {record['logger']}: {record['message'][:160]}")
        except (ValueError, KeyError):
            lines.append(line[:200])
    top = sorted(imports, reverse=True)[:25]
    return lines + [f"import {us / 1e6:6.3f} s cumulative {name}" for us, name in top]


def median(values: list[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(harness.median(clean), 3) if clean else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1")
    parser.add_argument("--shards", default="1", help="one per --streams entry")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--device", default="cuda", help="torch device: cuda or cpu")
    parser.add_argument("--variants", default="off,cold,warm,onnxruntime")
    parser.add_argument("--clip", help="default: people.mp4 (at 1080p with --big-clip)")
    parser.add_argument("--big-clip", action="store_true", help="make a 1080p clip first")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--builds", help="NAME=SITE,NAME=SITE: builds run in turn, side by side")
    parser.add_argument("--timeline", action="store_true",
                        help="then one warm run of the first case with the debug log and "
                             "python -X importtime, printed with seconds after launch")  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vapipe-startup-"))
    clip = args.clip or "sample:people"
    if args.big_clip:
        from bench.streams_bench import make_clip

        clip = str(make_clip(work / "clip1080.mp4", seconds=3.0))
    pre = 'backend = "opencl"' if args.device == "cuda" else 'backend = "numpy"'
    variants = args.variants.split(",")
    builds: list[tuple[str, str | None]] = [("", None)]
    if args.builds:
        builds = [(f"@{n}", site) for n, site in (b.split("=", 1) for b in args.builds.split(","))]
    results: dict[str, Any] = {"command": " ".join(sys.argv), "device": args.device,
                               "clip": clip, "cases": []}  # fmt: skip
    for streams, shards in zip(
        map(int, args.streams.split(",")), map(int, args.shards.split(",")), strict=True
    ):
        case: dict[str, Any] = {"streams": streams, "shards": shards, "runs": {}}
        warm_cache = work / "cache-warm"
        # The warm variant's entry is built by a run of its own, not timed.
        one_run(work, write_config(work, clip, streams, shards,
                                   backend_table("warm", args.device, warm_cache), pre),
                args.frames)  # fmt: skip
        for index in range(args.runs):
            for variant in variants:
                cache = (
                    warm_cache if variant == "warm" else work / f"cache-{variant}-{streams}-{index}"
                )
                config = write_config(
                    work, clip, streams, shards, backend_table(variant, args.device, cache), pre
                )
                for build, site in builds:
                    run = one_run(work, config, args.frames, site)
                    case["runs"].setdefault(variant + build, []).append(run)
                    print(streams, shards, variant + build, run["first_event_s"], run["exit_s"],
                          run["model"][0], flush=True)  # fmt: skip
        case["median_first_event_s"] = {
            v: median([r["first_event_s"] for r in runs]) for v, runs in case["runs"].items()
        }
        case["median_exit_s"] = {
            v: median([r["exit_s"] for r in runs]) for v, runs in case["runs"].items()
        }
        results["cases"].append(case)
        print(json.dumps({k: case[k] for k in ("streams", "shards", "median_first_event_s")}))
    if args.timeline:
        streams, shards = int(args.streams.split(",")[0]), int(args.shards.split(",")[0])
        table = backend_table("warm", args.device, work / "cache-warm")
        config = write_config(work, clip, streams, shards, table, pre)
        results["timeline"] = timeline(work, config, args.frames)
        print("\n".join(results["timeline"]))
    shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.record(args.out, results)


if __name__ == "__main__":
    os.environ.setdefault("VAPIPE_OFFLINE", "1")
    main()
