"""Where the 16 x 1080p graph's time goes once NVDEC decodes (issue 51): the same looped
streams through the CLI per variant (decoder, shards, inference workers), alternating, with
the GPU's and the CPU's busy share of each run; ``--spy`` records py-spy samples of one
variant's busiest processes (bench/run_sampler.spy).

    python bench/nvdec_variants.py --clip clip1080.mp4 --runs 2 \\
        --variants sw8,nv8,nv4,nv2 --out bench/results/streams/variants_nvdec.json

A variant's name is its decoder (``sw`` software, ``nv`` NVDEC), its shard count and
optionally ``wN`` (inference workers), ``sN`` (streams, default 16) and ``cN`` (``[pipeline]
python_cpus``: the runtime's threads on N cores): ``nv4w1s32``, ``nv1w1c2``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness, streams_bench  # noqa: E402

KEYS = (
    "steady_fps", "steady_cpu_busy_pct", "gpu_util_mean_pct", "mean_batch", "decoders",
    "stage_mean_ms", "stage_fps", "dropped",
)  # fmt: skip


def config_of(name: str) -> dict[str, Any]:
    found = re.fullmatch(r"(sw|nv)(\d+)(?:w(\d+))?(?:s(\d+))?(?:c(\d+))?", name)
    if found is None:
        raise SystemExit(f"bad variant {name!r}: e.g. nv4, sw8, nv4w1, nv8s32, nv1w1c2")
    decoder, shards, workers, streams, cores = found.groups()
    return {
        "hwaccel": "nvdec" if decoder == "nv" else None,
        "shards": shards,
        "workers": int(workers or 2),
        "streams": int(streams or 16),
        "python_cpus": int(cores) if cores else None,
    }


def run(clip: Path, work: Path, name: str, frames: int, spy: bool) -> dict[str, Any]:
    config = config_of(name)
    folder = Path(tempfile.mkdtemp(dir=work, prefix=name + "-"))
    path = streams_bench.write_config(
        folder, clip, config["streams"], config["shards"], True, queue_size=8, loop=True,
        torch_pre=True, hwaccel=config["hwaccel"], workers=config["workers"],
        python_cpus=config["python_cpus"],
    )  # fmt: skip
    env = {"VAPIPE_BENCH_SPY": str(work / "spy")} if spy else {}
    os.environ.update(env)
    try:
        result = streams_bench.run_pipeline(folder, path, max_frames=frames)
    finally:
        os.environ.pop("VAPIPE_BENCH_SPY", None)
    if "error" in result:
        return {"error": result["error"][-600:]}
    return {key: result.get(key) for key in KEYS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", type=Path, help="a 1080p H.264 clip (default: made)")
    parser.add_argument("--variants", default="sw8,nv8,nv4,nv2")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--frames", type=int, default=1200, help="per source")
    parser.add_argument("--spy", help="the variant whose processes py-spy records once")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vapipe-nvdec-variants"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    clip = args.clip or streams_bench.make_clip(args.work / "clip1080.mp4")
    names = args.variants.split(",")
    streams_bench.run_pipeline(  # fills the compiled-model cache, unmeasured
        args.work,
        streams_bench.write_config(args.work, clip, 1, "1", True, torch_pre=True),
        max_frames=50,
    )
    report: dict[str, Any] = {"variants": {}}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for index in range(args.runs):
        for name in names:
            spy = index == 0 and name == args.spy
            runs[name].append(run(clip, args.work, name, args.frames, spy))
            print(name, runs[name][-1], flush=True)
    for name, results in runs.items():
        rates = [r["steady_fps"] for r in results if r.get("steady_fps")]
        report["variants"][name] = {
            "config": config_of(name),
            "steady_fps": round(harness.median(rates), 1) if rates else None,
            "runs": results,
        }
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
