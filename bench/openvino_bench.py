"""OpenVINO (the onnxruntime-openvino build) against onnxruntime's own CPU provider, on this
machine's CPU: the measurement behind ``providers = "auto"`` passing OpenVINO over where it
offers only the CPU (stages/infer/backends/openvino.py).

    .venv/bin/pip install -q --no-deps --target .venv/openvino-site onnxruntime-openvino
    python bench/openvino_bench.py --runs 3

Two measures, settings alternating run by run, median of ``--runs``:

- model: one session, batch 1, every core, frames/s over 60 calls (the measure of issue 32);
- pipeline: configs/file.toml on the whole of people.mp4 as shipped (2 workers of 1 thread
  each), frames/s from ``--stats``.

Settings: the plain build's CPU provider; the OpenVINO build's CPU provider; the OpenVINO
provider on its CPU device (with the options the pipeline gives it). Writes
bench/results/openvino.{json,md}.
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

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
MODELS = ("yolox-nano", "yolov8n")
SETTINGS = {  # name: (use the OpenVINO build, provider)
    "onnxruntime CPU": (False, "cpu"),
    "onnxruntime-openvino CPU": (True, "cpu"),
    "onnxruntime-openvino OpenVINO": (True, "openvino"),
}
MODEL_ONLY = """
import json, sys, time, numpy as np, onnxruntime as ort
path, provider = sys.argv[1], sys.argv[2]
options = ort.SessionOptions()
options.log_severity_level = 3
options.add_session_config_entry("session.intra_op.allow_spinning", "0")
names = ["OpenVINOExecutionProvider", "CPUExecutionProvider"] if provider == "openvino" else [
    "CPUExecutionProvider"]
session = ort.InferenceSession(path, options, providers=names)
first = session.get_inputs()[0]
x = np.random.default_rng(0).random([1, *first.shape[1:]], np.float32)
for _ in range(5):
    session.run(None, {first.name: x})
started = time.monotonic()
for _ in range(60):
    session.run(None, {first.name: x})
print(json.dumps({"fps": 60 / (time.monotonic() - started), "ort": ort.__version__,
                  "provider": session.get_providers()[0]}))
"""


def environment(site: Path, openvino_build: bool, cache: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    if openvino_build:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def model_fps(model: Path, setting: str, site: Path, work: Path) -> dict[str, Any]:
    build, provider = SETTINGS[setting]
    done = subprocess.run(
        [sys.executable, "-c", MODEL_ONLY, str(model), provider],
        env=environment(site, build, work / "cache"),
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def pipeline_fps(model: str, setting: str, site: Path, work: Path) -> dict[str, Any]:
    build, provider = SETTINGS[setting]
    stats = work / "stats.json"
    command = [sys.executable, "-m", "vapipe", str(REPO / "configs" / "file.toml")]
    command += ["--set", f"det.model={model}", "--set", f'det.backend.providers=["{provider}"]']
    command += ["--stats", str(stats), "--log-level", "warning"]
    done = subprocess.run(
        command, cwd=work, env=environment(site, build, work / "cache"), capture_output=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{setting}: exit {done.returncode}: {done.stderr[-800:]!r}")
    shown = json.loads(stats.read_text())
    return {
        "fps": shown["stages"]["events"]["frames"] / shown["wall_s"],
        "provider": shown["stages"]["det"]["provider"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--site", type=Path, default=Path(sys.prefix) / "openvino-site")
    args = parser.parse_args()
    from vapipe.pipeline import assets

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in MODELS:
            path = assets.resolve_model(model)
            runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for _ in range(args.runs):
                for setting in SETTINGS:
                    runs.setdefault(("model", setting), []).append(
                        model_fps(path, setting, args.site, work)
                    )
                    runs.setdefault(("pipeline", setting), []).append(
                        pipeline_fps(model, setting, args.site, work)
                    )
            for (measure, setting), seen in runs.items():
                rows.append({
                    "model": model, "measure": measure, "setting": setting,
                    "provider": seen[0]["provider"],
                    "fps": round(harness.median(r["fps"] for r in seen), 1),
                    "runs_fps": [round(r["fps"], 1) for r in seen],
                })  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
    result = {
        "benchmark": "OpenVINO against onnxruntime's CPU provider on this CPU",
        "command": f"python bench/openvino_bench.py --runs {args.runs}",
        "cpus": os.cpu_count(),
        "cpu": cpu_name(),
        "rows": rows,
    }
    harness.record((RESULTS / "openvino.json"), result)
    (RESULTS / "openvino.md").write_text(markdown(result))
    print(markdown(result))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# OpenVINO against onnxruntime's CPU provider",
        "",
        f"`{result['command']}` on {result['cpus']} cores ({result['cpu']}). Model: one "
        "session, batch 1, every core. Pipeline: configs/file.toml on people.mp4 as shipped "
        "(2 workers of 1 thread; OpenVINO gets one stream per worker). Median frames/s, "
        "settings alternating run by run.",
        "",
        "| model | measure | onnxruntime CPU | onnxruntime-openvino CPU "
        "| onnxruntime-openvino OpenVINO | OpenVINO / onnxruntime CPU |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    table: dict[tuple[str, str], dict[str, float]] = {}
    for row in result["rows"]:
        table.setdefault((row["model"], row["measure"]), {})[row["setting"]] = row["fps"]
    for (model, measure), fps in table.items():
        plain, ov = fps["onnxruntime CPU"], fps["onnxruntime-openvino OpenVINO"]
        lines.append(
            f"| {model} | {measure} | {plain} | {fps['onnxruntime-openvino CPU']} | {ov} "
            f"| {ov / plain:.2f}x |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
