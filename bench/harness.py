"""The one harness of the benchmarks: sides run alternating (so that drift in the machine's
load hits each alike), several runs of each, medians and side-by-side ratios, the machine
described, and one current result file per benchmark that says which command made it.

    from bench import harness

    runs = harness.alternate({"a": lambda: measure(a), "b": lambda: measure(b)}, runs=5)
    fps = {side: harness.summary([r["fps"] for r in results]) for side, results in runs.items()}
    harness.record(RESULTS / "mine.json", {
        "benchmark": "what it measures",
        "fps": fps, "ratio_b_over_a": harness.ratio(fps["b"]["median"], fps["a"]["median"]),
    })
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
PACKAGES = ("numpy", "onnxruntime", "av", "opencv-python-headless", "torch", "pyopencl")
"""The libraries whose versions a result names, where installed."""

T = TypeVar("T")


def alternate(
    sides: Mapping[str, Callable[[], T]],
    runs: int,
    *,
    say: Callable[[str], None] | None = None,
) -> dict[str, list[T]]:
    """Each side's results of ``runs`` runs, taken in turn (a, b, a, b, ...), never all of one
    side first. ``say`` gets one line per run (stderr by default)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    tell = say or (lambda line: print(line, file=sys.stderr, flush=True))
    results: dict[str, list[T]] = {name: [] for name in sides}
    for index in range(runs):
        for name, measure in sides.items():
            result = measure()
            results[name].append(result)
            tell(f"run {index + 1}/{runs} {name}: {shown(result)}")
    return results


def shown(result: Any) -> str:
    if isinstance(result, Mapping):
        return ", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                         for key, value in result.items())  # fmt: skip
    return f"{result:.4g}" if isinstance(result, float) else str(result)


def median(values: Iterable[float]) -> float:
    """The median of the runs (the figure every result quotes)."""
    listed = list(values)
    if not listed:
        raise ValueError("no runs to take the median of")
    return float(statistics.median(listed))


def summary(values: Iterable[float], digits: int = 2) -> dict[str, Any]:
    """The runs as measured and their median, rounded to ``digits``."""
    listed = [float(v) for v in values]
    return {"runs": [round(v, digits) for v in listed], "median": round(median(listed), digits)}


def ratio(numerator: float, denominator: float, digits: int = 3) -> float | None:
    """numerator / denominator, rounded; None where the denominator is 0."""
    return round(numerator / denominator, digits) if denominator else None


def machine() -> dict[str, Any]:
    """What the result was measured on: cores, processor, memory, OS, Python, the libraries'
    versions and the GPUs (``nvidia-smi -L``) where there are any."""
    described: dict[str, Any] = {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "processor": _processor(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    for package in PACKAGES:
        try:
            described[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    gpus = _gpus()
    if gpus:
        described["gpus"] = gpus
    return described


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError):
        pass
    return None


def _gpus() -> list[str]:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def commit() -> str | None:
    """The checkout's commit, with ``+changes`` when its tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=REPO,
                              capture_output=True, text=True, timeout=20, check=True)  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True, timeout=20)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def command(argv: Sequence[str] | None = None) -> str:
    """The command that made the result, as a person would type it from the checkout."""
    args = list(sys.argv if argv is None else argv)
    script = Path(args[0]).resolve()
    shown_script = script.relative_to(REPO) if script.is_relative_to(REPO) else script
    return shlex.join(["python", str(shown_script), *args[1:]])


def record(path: Path, payload: Mapping[str, Any], about: str | None = None) -> dict[str, Any]:
    """Writes the benchmark's one current result file: what it measures (``payload``'s
    ``benchmark``, else ``about``, else the first line of the script's docstring), the command,
    the date, the commit and the machine, then ``payload``. Returns what was written."""
    main = sys.modules.get("__main__")
    benchmark = payload.get("benchmark") or about or (main.__doc__ or "").strip().split("\n")[0]
    described = machine()
    if isinstance(payload.get("machine"), Mapping):  # what the benchmark adds (a GPU's name)
        described.update(payload["machine"])
    result: dict[str, Any] = {
        "benchmark": benchmark,
        "command": command(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit(),
        "machine": described,
    }
    result.update((key, value) for key, value in payload.items() if key not in result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    return result


def pipeline_run(
    config: Path, frames: int, folder: Path, sets: Sequence[str] = ()
) -> dict[str, Any]:
    """``python -m vapipe CONFIG`` for ``frames`` frames, its source looped, in a new
    ``folder`` (outputs land there), quiet, with ``--set`` for each of ``sets``: its
    ``--stats``, with ``fps`` added: frames / the time from every stage open to the end (the
    steady rate: a model's load is paid once per run, not per frame)."""
    folder.mkdir()
    stats = folder / "stats.json"
    command = [sys.executable, "-m", "vapipe", str(config), "--set", "cam.loop=true",
               "--max-frames", str(frames), "--stats", str(stats), "--log-level", "warning",
               "--no-progress"]  # fmt: skip
    for item in sets:
        command += ["--set", item]
    subprocess.run(command, cwd=folder, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(stats.read_text())
    result["fps"] = frames / (result["wall_s"] - result["startup"]["to_ready_s"])
    return result


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
