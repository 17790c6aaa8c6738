"""Two builds of vapipe side by side on the same pipeline: alternating runs, median of each.

    pip wheel --no-deps --no-build-isolation -w /tmp/a OLD_CHECKOUT
    pip install --no-deps --target /tmp/a-site /tmp/a/vapipe-*.whl      # and so for b
    python bench/compare_builds.py --a /tmp/a-site --b /tmp/b-site --runs 7

Each run is a fresh ``python -m vapipe CONFIG --stats`` with the build's folder first on
PYTHONPATH, so nothing of one build is imported by the other. Reports frames/s over the run's
own wall time (``wall_s`` in the stats: stages opened, frames through, files closed) and over
the whole process (imports included), the medians, and b / a. For checking that a change
(a refactor, say) leaves speed where it was.

    python bench/compare_builds.py --a /tmp/a-site --b /tmp/b-site --events

instead runs every sample config that runs offline once with each build and says whether
their events are the same (every JSON line each wrote, less its wall-clock ``time``), and
where they first differ: for checking that a change leaves behaviour where it was. With the
same build on both sides, whether two runs (batched as their timing falls) write the same
events. ``attributes.toml`` runs a stand-in classifier made here (its ResNet18 is a download).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

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


EVENT_CONFIGS: dict[str, tuple[str, ...]] = {
    "file.toml": (),
    "analytics.toml": (),
    # Paced like cameras, its leaky links drop frames by timing: read as files, nothing drops.
    "multi.toml": tuple(f"cam{n}.realtime=false" for n in (1, 2, 3)),
    "gpu.toml": (),
    "faces.toml": (),
    # Its ResNet18 is a download: a stand-in classifier made here (light or dark vehicles).
    "attributes.toml": ("kind.model={stand_in}", "kind.threshold=0.5"),
}
"""The sample configs that run offline on sample media with no service or cluster, with
the overrides that make two runs of one build write the same events."""
VARYING = ("time",)
"""Keys of an event that differ between two runs of the same build (wall-clock time)."""


def events_of(
    site: Path,
    config: Path,
    python: str,
    max_frames: int | None = None,
    overrides: tuple[str, ...] = (),
) -> dict[str, list[dict[str, object]]]:
    """Every JSON-lines file ``config`` wrote with build ``site`` (path -> its events, less
    their wall-clock keys)."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [python, "-m", "vapipe", str(config), "--log-level", "warning", "--no-progress"]
        args += ["--max-frames", str(max_frames)] if max_frames else []
        for override in overrides:
            args += ["--set", override]
        env = {**os.environ, "PYTHONPATH": str(site)}
        done = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{site} {config.name}: exit {done.returncode}: {done.stderr[-500:]}")
        found = {}
        for path in sorted(Path(tmp).rglob("*.jsonl")):
            lines = path.read_text(encoding="utf-8").splitlines()
            events = [json.loads(line) for line in lines]
            for event in events:
                for key in VARYING:
                    event.pop(key, None)
            # Sources that share a file interleave by timing: each source's events in order.
            events.sort(key=lambda e: (str(e.get("source_id")), e.get("seq") or 0))
            found[str(path.relative_to(tmp))] = events
        return found


def first_difference(
    a: dict[str, list[dict[str, object]]], b: dict[str, list[dict[str, object]]]
) -> str | None:
    """Where two runs' events first differ, or None when they are the same."""
    if a.keys() != b.keys():
        return f"files {sorted(a)} vs {sorted(b)}"
    for name, events in a.items():
        if len(events) != len(b[name]):
            return f"{name}: {len(events)} events vs {len(b[name])}"
        for index, (one, other) in enumerate(zip(events, b[name], strict=True)):
            if one != other:
                shown = [json.dumps(event)[:300] for event in (one, other)]
                return f"{name} line {index + 1}: {shown[0]} vs {shown[1]}"
    return None


def compare_events(
    a: Path, b: Path, python: str, max_frames: int | None, names: list[str]
) -> dict[str, object]:
    results: dict[str, object] = {}
    stand_in = Path(tempfile.mkdtemp()) / "stand_in_classifier.onnx"
    if "attributes.toml" in names:
        from tests.object_models import brightness_classifier

        brightness_classifier(stand_in)
    for name in names:
        config = REPO / "configs" / name
        overrides = tuple(o.format(stand_in=stand_in) for o in EVENT_CONFIGS[name])
        one = events_of(a, config, python, max_frames, overrides)
        other = events_of(b, config, python, max_frames, overrides)
        difference = first_difference(one, other)
        results[name] = {
            "files": len(one),
            "events": sum(len(events) for events in one.values()),
            "same": difference is None,
            **({"difference": difference} if difference else {}),
        }
    return results


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
    parser.add_argument("--events", action="store_true", help="compare events, not speed")
    parser.add_argument("--max-frames", type=int, help="with --events: frames per source")
    parser.add_argument(
        "--configs", nargs="+", choices=list(EVENT_CONFIGS), default=list(EVENT_CONFIGS),
        help="with --events: which sample configs",
    )  # fmt: skip
    args = parser.parse_args()
    for side in (args.a, args.b):
        found = where_vapipe_is(side, args.python)
        if not found.startswith(str(side.resolve())):
            raise SystemExit(f"{side}: vapipe is imported from {found}, not from this folder")
    if args.events:
        same = {
            "benchmark": "events of two builds",
            "max_frames": args.max_frames,
            "configs": compare_events(args.a, args.b, args.python, args.max_frames, args.configs),
        }
        print(json.dumps(same, indent=1))
        if args.output:
            harness.record(args.output, same)
        return
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
        medians = {name: harness.median(r[key] for r in runs[name]) for name in runs}
        result[key] = {name: [round(r[key], 2) for r in runs[name]] for name in runs}
        result[f"median_{key}"] = {name: round(value, 2) for name, value in medians.items()}
        result[f"ratio_{key}_b_over_a"] = round(medians["b"] / medians["a"], 3)
    print(json.dumps(result, indent=1))
    if args.output:
        harness.record(args.output, result)


if __name__ == "__main__":
    main()
