"""How many cameras one box watches: N real-time sources of 640x360 at 15 fps through the
analytics graph, per setting, up to the largest N with under 1% of frames dropped and a p95
capture-to-event latency under 500 ms.

    python bench/cameras_bench.py --counts 4,6,8,12,16,20 --seconds 40
    python bench/cameras_bench.py --settings full,interval3 --counts 2 --seconds 8   # a smoke run

The sources are traffic.mp4 and people.mp4, each made 640x360 at 15 fps once (PyAV), looped
at their own pace (``realtime``, ``loop``, ``live``: queues drop the oldest frame when the
pipeline falls behind, as with cameras). The graph is configs/analytics.toml's (YOLOX-Nano on
ONNX Runtime's CPU provider, track, a line and a zone, JSON events), all sources through one
detector. Each run is ``run-pipeline`` stopped with SIGINT after ``--seconds``; its ``--stats``
give the frames decoded and dropped per link and the events sink's latency per source.
Settings: ``full`` (every frame), ``interval2``, ``interval3``, ``interval4``, ``motion`` (a
motion node before preprocessing), ``interval3_motion``, ``interval4_motion``. A benchmark,
never a test. The report gives each setting's counts on the accuracy benchmark's clips
beside it, from bench/results/accuracy.json (``--markdown-only`` writes it again from the
JSON files).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline.assets import resolve_media  # noqa: E402

SETTINGS: dict[str, dict[str, Any]] = {
    "full": {},
    "interval2": {"interval": 2},
    "interval3": {"interval": 3},
    "interval4": {"interval": 4},
    "motion": {"motion": True},
    "interval3_motion": {"interval": 3, "motion": True},
    "interval4_motion": {"interval": 4, "motion": True},
    "rect": {"rect": True},
    "interval2_rect": {"interval": 2, "rect": True},
    "interval3_rect": {"interval": 3, "rect": True},
    "interval4_rect": {"interval": 4, "rect": True},
}
FPS = 15
"""The sources' frame rate: interval N detects once per N/15 s."""
DROP_LIMIT = 0.01
P95_LIMIT_MS = 500.0


def small_clip(name: str, target: Path, fps: int = FPS, size: tuple[int, int] = (640, 360)) -> Path:
    """``sample:NAME`` re-encoded at ``size`` and ``fps`` (frames dropped evenly)."""
    with av.open(resolve_media(f"sample:{name}")) as src, av.open(str(target), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
        stream.options = {"preset": "veryfast", "g": str(fps * 2)}
        rate = src.streams.video[0].average_rate or Fraction(25)
        kept = 0
        for index, frame in enumerate(src.decode(video=0)):
            if index * fps < kept * float(rate):  # keep fps of each second's frames
                continue
            kept += 1
            image = frame.reformat(width=size[0], height=size[1], format="yuv420p")
            image.pts, image.time_base = kept - 1, Fraction(1, fps)
            for packet in stream.encode(image):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return target


def config_text(clips: list[Path], count: int, setting: dict[str, Any], out: Path) -> str:
    names = [f"cam{i}" for i in range(count)]
    head = "motion" if setting.get("motion") else "pre"
    links = [f"{name} ! {head}" for name in names]
    links.append(("motion ! pre ! " if setting.get("motion") else "pre ! ")
                 + "det ! nms ! track ! analytics ! events")  # fmt: skip
    text = f"links = {json.dumps(links)}\n[pipeline]\nqueue_size = 8\n"
    for index, name in enumerate(names):
        clip = clips[index % len(clips)]
        text += (f'[nodes.{name}]\ntype = "source"\nuri = "{clip}"\nrealtime = true\n'
                 "loop = true\nlive = true\n")  # fmt: skip
    if setting.get("motion"):
        text += '[nodes.motion]\ntype = "motion"\n'
    text += '[nodes.pre]\ntype = "preprocess"\n'
    text += ('[nodes.det]\ntype = "infer"\nmodel = "yolox-nano"\nworkers = 2\nmax_batch = 4\n'
             f"interval = {setting.get('interval', 0)}\n"
             f"rect = {str(setting.get('rect', False)).lower()}\n"
             'backend = { type = "onnxruntime", providers = ["cpu"], threads = 1 }\n')  # fmt: skip
    text += '[nodes.nms]\ntype = "nms"\nconf = 0.2\n[nodes.track]\ntype = "track"\n'
    text += ('[nodes.analytics]\ntype = "analytics"\nnormalized = true\n'
             'lines = [{ name = "mid", start = [0.5, 0.05], end = [0.5, 0.95] }]\n')  # fmt: skip
    text += f'[nodes.events]\ntype = "events"\npath = "{out}"\nempty_frames = false\n'
    return text


def run_once(text: str, seconds: float, work: Path) -> dict[str, Any]:
    config, stats = work / "cameras.toml", work / "stats.json"
    config.write_text(text)
    process = subprocess.Popen(
        [sys.executable, "-m", "vapipe", str(config), "--stats", str(stats),
         "--log-level", "warning", "--no-progress"],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(seconds)  # a benchmark's measured span, not a test's wait
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    if not stats.exists():
        raise SystemExit(f"no stats (exit {process.returncode}): {err[-800:]}")
    data = json.loads(stats.read_text())
    stages = data["stages"]
    decoded = sum(s["frames"] for n, s in stages.items() if s.get("type") == "source")
    dropped = sum(q["dropped"] for q in data["queues"].values())
    latency = stages["events"].get("latency", {})
    return {
        "frames_decoded": decoded,
        "frames_dropped": dropped,
        "dropped_share": round(dropped / decoded, 4) if decoded else None,
        "p95_ms_worst_source": max((v["p95_ms"] for v in latency.values()), default=None),
        "detected_frames": stages["det"].get("detected_frames", stages["det"]["frames"]),
        "det_fps": stages["det"].get("fps"),
        "wall_s": data.get("wall_s"),
    }


def keeps_up(result: dict[str, Any]) -> bool:
    p95 = result["p95_ms_worst_source"]
    return (result["dropped_share"] or 0) < DROP_LIMIT and p95 is not None and p95 < P95_LIMIT_MS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--counts", default="4,6,8,12,16,20")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/cameras")
    parser.add_argument("--markdown-only", action="store_true")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per count; a count is kept up with if all of them are",
    )
    parser.add_argument("--merge", action="store_true",
                        help="keep the other settings of the report at --out")  # fmt: skip
    args = parser.parse_args()
    if args.markdown_only:
        args.out.with_suffix(".md").write_text(
            markdown(json.loads(args.out.with_suffix(".json").read_text()))
        )
        return
    counts = [int(c) for c in args.counts.split(",")]
    report: dict[str, Any] = {
        "command": "python bench/cameras_bench.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "limits": {"dropped_share": DROP_LIMIT, "p95_ms": P95_LIMIT_MS},
        "settings": {},
    }
    if args.merge:
        report["settings"] = json.loads(args.out.with_suffix(".json").read_text())["settings"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        clips = [small_clip(n, work / f"{n}_360p15.mp4") for n in ("traffic", "people")]
        for name in args.settings.split(","):
            runs, best = [], 0
            for count in counts:  # up until the first count it cannot keep up with
                text = config_text(clips, count, SETTINGS[name], work / "events.jsonl")
                kept_up = True
                for _ in range(args.repeat):
                    result = {"cameras": count, **run_once(text, args.seconds, work)}
                    runs.append(result)
                    print(name, json.dumps(result), flush=True)
                    kept_up = kept_up and keeps_up(result)
                if not kept_up:
                    break
                best = count
            report["settings"][name] = {"most_cameras": best, "runs": runs,
                                        "command": report["command"]}  # fmt: skip
            harness.record(args.out.with_suffix(".json"), report)
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


ACCURACY = REPO / "bench" / "results" / "accuracy.json"
ACCURACY_NAMES = {"full": "defaults", "motion": "motion", "rect": "rect"}
"""This benchmark's settings by their name in the accuracy benchmark (the rest by rule)."""


def accuracy_name(setting: str) -> str:
    """The accuracy benchmark's setting that detects as often: interval N here (15 fps) is
    ``interval_s`` N/15 on its 24 fps clips, where interval N would detect more often."""
    if setting in ACCURACY_NAMES:
        return ACCURACY_NAMES[setting]
    every, *extra = setting.removeprefix("interval").split("_")
    return f"every {camera_seconds(int(every)):g} s" + "".join(f" + {e}" for e in extra)


def camera_seconds(interval: int) -> float:
    """``interval`` at these sources' frame rate, in seconds (2 decimals)."""
    return round(interval / FPS, 2)


def counts_beside_full(accuracy: dict[str, Any], setting: str) -> dict[str, Any] | None:
    """How the setting counts on the accuracy clips (both models): its count error per split,
    and how many lines count within 1 of detecting on every frame."""
    name = accuracy_name(setting)
    if name not in accuracy["totals"]:
        return None
    counted: dict[tuple[str, str, str, str], int] = {}
    for row in accuracy["results"]:
        for line, crossing in row["result"].get("crossings", {}).items():
            counted[(row["setting"], row["clip"], row["model"], line)] = crossing["counted"]
    gaps = [
        abs(count - counted[("defaults", *key)])
        for (name_of, *key), count in counted.items()
        if name_of == name and ("defaults", *key) in counted
    ]
    totals = accuracy["totals"][name]
    return {
        "error_tuning": totals["tuning"]["error"],
        "error_held_out": totals["held-out"]["error"],
        "lines": len(gaps),
        "lines_within_1": sum(gap <= 1 for gap in gaps),
        "largest_gap": max(gaps, default=0),
    }


def markdown(report: dict[str, Any]) -> str:
    accuracy = json.loads(ACCURACY.read_text()) if ACCURACY.exists() else None
    settings = report["settings"].values()
    commands = "`, `".join(dict.fromkeys(e.get("command", report["command"]) for e in settings))
    lines = ["# Cameras per box", "", f"`{commands}` on {report['machine']}: N sources "
             "of 640x360 at 15 fps (traffic and people, looped in real time) through the analytics "
             "graph; the most N with under 1% of frames dropped and p95 capture-to-event under "
             "500 ms. Counts: the accuracy benchmark's clips at the same setting and the same "
             "detections per second (interval N at 15 fps is its `every N/15 s`; both models, "
             "YOLOX-Nano only with rect; bench/results/accuracy.md): count error summed over its "
             "tuning / held-out clips, and the lines counting within 1 of every-frame "
             "detection.", "",
             "| setting | most cameras | count error (tuning / held-out) | lines within 1 of "
             "every frame | runs (N: dropped share, p95 ms) |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for name, entry in report["settings"].items():
        runs = "; ".join(f"{r['cameras']}: {r['dropped_share']}, {r['p95_ms_worst_source']}"
                         for r in entry["runs"])  # fmt: skip
        found = counts_beside_full(accuracy, name) if accuracy else None
        error = f"{found['error_tuning']} / {found['error_held_out']}" if found else "-"
        within = (f"{found['lines_within_1']} of {found['lines']} (largest gap "
                  f"{found['largest_gap']})" if found else "-")  # fmt: skip
        lines.append(f"| {name} | {entry['most_cameras']} | {error} | {within} | {runs} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
