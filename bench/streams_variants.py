"""16 x 1080p in 8 shards under several variants of build, backend table and environment,
alternating run by run in one call: where a 16-stream figure moved, and why.

    python bench/streams_variants.py --variant warm=SITE_A:cache \\
        --variant off=SITE_A:off --variant omp1=SITE_A:cache:OMP_NUM_THREADS=1 \\
        --variant base=SITE_B:none --runs 2 --out DIR

A variant is ``NAME=SITE:CACHE[:ENV=VALUE,...]``: ``SITE`` a build installed with
``pip install --target``, ``CACHE`` one of ``cache`` (the compiled-model cache, filled by one
unmeasured run first), ``off`` (``cache_dir = "off"``), ``cold`` (an empty cache at every run)
or ``none`` (a build without the cache setting); ``DECODE_THREADS=N`` among the ``ENV`` pairs
sets the sources' ``decode_threads``, ``HOST_WAIT=spin`` the torch backend's ``host_wait``,
``PRE=torch`` the preprocess node's backend (default ``opencl``), ``SHARDS=N`` the shard count
(default 8), instead of environment variables. Each run records
the steady rate (event lines per second between 20% and 80% of the run's lines), the sink's
rate over its span, and every shard's inference table and start-up; ``VAPIPE_BENCH_SPY`` as
in streams_bench.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import streams_bench  # noqa: E402
from bench.headline import LOOPED_FRAMES  # noqa: E402


def parse(spec: str) -> tuple[str, str, str, dict[str, str]]:
    name, rest = spec.split("=", 1)
    site, cache, *env = rest.split(":")
    pairs = dict(item.split("=", 1) for item in ",".join(env).split(",") if item)
    return name, site, cache, pairs


def backend_table(cache: str, folder: Path) -> str:
    table = 'type = "torch"\ndevice = "cuda"'
    if cache == "off":
        return table + '\ncache_dir = "off"'
    if cache in ("cache", "cold"):
        return table + f'\ncache_dir = "{folder}"'
    return table


def one_run(work: Path, clip: Path, site: str, cache: str, env: dict[str, str],
            cache_dir: Path, frames: int) -> dict[str, Any]:  # fmt: skip
    folder = Path(tempfile.mkdtemp(dir=work))
    env = dict(env)
    threads = env.pop("DECODE_THREADS", None)  # the source's decode_threads, not an env var
    wait = env.pop("HOST_WAIT", None)  # the torch backend's host_wait
    pre = env.pop("PRE", "opencl")  # the preprocess node's backend
    shards = env.pop("SHARDS", "8")
    if cache == "cold":
        cache_dir = Path(tempfile.mkdtemp(dir=work))
    config = streams_bench.write_config(
        folder, clip, 16, shards, True, queue_size=8,
        backend_extra=backend_table(cache, cache_dir) + (f'\nhost_wait = "{wait}"' if wait else ""),
        loop=True,
        decode_threads=int(threads) if threads else None, torch_pre=pre == "torch",
    )  # fmt: skip
    return streams_bench.run_pipeline(
        folder, config, extra_env={"PYTHONPATH": site, **env}, max_frames=frames
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--frames", type=int, default=LOOPED_FRAMES)
    parser.add_argument("--work", type=Path, default=Path("/tmp/vapipe-variants"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    clip = streams_bench.make_clip(args.work / "clip1080.mp4")
    variants = [parse(spec) for spec in args.variant]
    caches: dict[str, Path] = {}  # one per build: variants of one build share its entry
    for _name, site, cache, env in variants:
        if cache == "cache" and site not in caches:  # fill it, unmeasured
            caches[site] = args.work / f"cache-{len(caches)}"
            one_run(args.work, clip, site, cache, env, caches[site], 50)
    report: dict[str, Any] = {"variants": args.variant, "runs": {}}
    for round_ in range(args.runs):
        for name, site, cache, env in variants:
            cache_dir = caches.get(site, args.work / "unused")
            result = one_run(args.work, clip, site, cache, env, cache_dir, args.frames)
            report["runs"].setdefault(name, []).append(result)
            keep = (
                "steady_fps",
                "steady_cpu_busy_pct",
                "gpu_util_mean_pct",
                "frames",
                "wall_s",
                "error",
            )
            brief = {k: result.get(k) for k in keep if k in result}
            brief["events_fps"] = result.get("stage_fps", {}).get("events")
            brief["det_ms"] = [s.get("mean_ms") for s in result.get("shard_det", [])]
            print(f"round {round_} {name}: {json.dumps(brief)}", flush=True)
            (args.out / "variants.json").write_text(json.dumps(report, indent=1) + "\n")
    summary = {}
    for name, runs in report["runs"].items():
        steady = [r["steady_fps"] for r in runs if r.get("steady_fps")]
        summary[name] = statistics.median(steady) if steady else None
    report["steady_fps_median"] = summary
    (args.out / "variants.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
