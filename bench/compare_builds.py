"""Two builds of vapipe side by side on the same pipeline: alternating runs, median of each.

    pip wheel --no-deps --no-build-isolation -w /tmp/a OLD_CHECKOUT
    pip install --no-deps --target /tmp/a-site /tmp/a/vapipe-*.whl      # and so for b
    python bench/compare_builds.py --a /tmp/a-site --b /tmp/b-site --runs 7

Each run is a fresh ``python -m vapipe CONFIG --stats`` with the build's folder first on
PYTHONPATH, so nothing of one build is imported by the other. Reports frames/s over the run's
own wall time (``wall_s`` in the stats: stages opened, frames through, files closed) and over
the whole process (imports included), the medians, and b / a. For checking that a change
(a refactor, say) leaves speed where it was.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(site: Path, config: Path, overrides: list[str], python: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        args = [python, "-m", "vapipe", str(config), "--stats", str(stats)]
        args += ["--log-level", "warning"]
        for override in overrides:
            args += ["--set", override]
        env = {**os.environ, "PYTHONPATH": str(site)}
        started = time.perf_counter()
        done = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{site}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
        process_s = time.perf_counter() - started
        shown = json.loads(stats.read_text())
        frames = shown["stages"]["events"]["frames"]
        return {
            "frames": frames,
            "fps": frames / shown["wall_s"],
            "process_fps": frames / process_s,
        }


def where_vapipe_is(site: Path, python: str) -> str:
    probe = "import vapipe.pipeline.runner as r; print(r.__file__)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [python, "-c", probe], env=env, capture_output=True, text=True, check=True, cwd="/"
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, type=Path, help="site folder of build a (before)")
    parser.add_argument("--b", required=True, type=Path, help="site folder of build b (after)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--config", type=Path, default=REPO / "configs/file.toml")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    for side in (args.a, args.b):
        found = where_vapipe_is(side, args.python)
        if not found.startswith(str(side.resolve())):
            raise SystemExit(f"{side}: vapipe is imported from {found}, not from this folder")
    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for _ in range(args.runs):
        for name, site in (("a", args.a), ("b", args.b)):
            runs[name].append(run_once(site, args.config, args.overrides, args.python))
    frames = {name: {r["frames"] for r in results} for name, results in runs.items()}
    result = {
        "benchmark": "two builds of vapipe, alternating runs",
        "config": str(args.config),
        "overrides": args.overrides,
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "frames": {name: sorted(values) for name, values in frames.items()},
    }
    for key in ("fps", "process_fps"):
        medians = {name: statistics.median(r[key] for r in runs[name]) for name in runs}
        result[key] = {name: [round(r[key], 2) for r in runs[name]] for name in runs}
        result[f"median_{key}"] = {name: round(value, 2) for name, value in medians.items()}
        result[f"ratio_{key}_b_over_a"] = round(medians["b"] / medians["a"], 3)
    print(json.dumps(result, indent=1))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
