"""What a snapshot, a clip and a history row per event cost: configs/analytics.toml as it is,
against the same graph with ``snapshots``, ``clips`` and ``history`` nodes at their defaults
(as configs/service.toml places them), on the traffic clip looped (--seconds of video), run
alternately in one call, fps = frames / wall time; and the disk they take, per hour of one
camera, from what the runs wrote.

    python bench/media_cost.py --runs 5 --seconds 60

Writes bench/results/media_cost.json and prints a markdown table.
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
ANALYTICS = REPO / "configs" / "analytics.toml"
RATE = 24000 / 1001  # traffic.mp4
MEDIA_NODES = """

[nodes.snapshots]
type = "snapshots"

[nodes.clips]
type = "clips"

[nodes.history]
type = "history"
"""


def media_config(folder: Path) -> Path:
    """analytics.toml with the three nodes between analytics and the events sink."""
    text = ANALYTICS.read_text(encoding="utf-8")
    old = '"analytics ! events"'
    assert old in text, "configs/analytics.toml's links changed: update this bench"
    text = text.replace(old, '"analytics ! snapshots ! clips ! events ! history"')
    path = folder / "media.toml"
    path.write_text(text + MEDIA_NODES, encoding="utf-8")
    return path


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run(config: Path, frames: int, folder: Path) -> dict[str, float]:
    stats = folder / "stats.json"
    command = [sys.executable, "-m", "vapipe", str(config), "--set", "cam.loop=true",
               "--max-frames", str(frames), "--stats", str(stats),
               "--log-level", "warning"]  # fmt: skip
    subprocess.run(command, cwd=folder, check=True, capture_output=True, text=True)
    result = json.loads(stats.read_text())
    out = folder / "out"
    media = size_of(out / "media") if (out / "media").exists() else 0
    database = sum(p.stat().st_size for p in out.glob("events.db*"))
    snapshots = clips = 0
    if (out / "media").exists():
        snapshots = len(list((out / "media").rglob("*.jpg")))
        clips = len(list((out / "media").rglob("*.mp4")))
    return {
        "fps": frames / result["wall_s"],
        "wall_s": result["wall_s"],
        "media_bytes": media,
        "history_bytes": database,
        "snapshots": snapshots,
        "clips": clips,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0, help="of video per run")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "media_cost.json")
    args = parser.parse_args()
    frames = round(args.seconds * RATE)
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "media": []}
    with tempfile.TemporaryDirectory() as scratch:
        config = media_config(Path(scratch))
        for index in range(args.runs):
            for name, path in (("plain", ANALYTICS), ("media", config)):
                folder = Path(scratch) / f"{name}-{index}"
                folder.mkdir()
                runs[name].append(run(path, frames, folder))
                print(f"run {index + 1} {name}: {runs[name][-1]['fps']:.1f} fps", flush=True)
    plain = harness.median(r["fps"] for r in runs["plain"])
    media = harness.median(r["fps"] for r in runs["media"])
    ratios = [m["fps"] / p["fps"] for p, m in zip(runs["plain"], runs["media"], strict=True)]
    per_hour = 3600 / args.seconds
    last = runs["media"][-1]
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "video_s_per_run": args.seconds,
        "frames_per_run": frames,
        "runs": runs,
        "median_fps": {"plain": round(plain, 1), "media": round(media, 1)},
        "ratio_median": round(harness.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "per_camera_hour": {
            "media_bytes": round(last["media_bytes"] * per_hour),
            "history_bytes": round(last["history_bytes"] * per_hour),
            "snapshots": round(last["snapshots"] * per_hour),
            "clips": round(last["clips"] * per_hour),
        },
    }
    harness.record(args.out, result)
    hour = result["per_camera_hour"]
    print(f"\n| graph | median fps | ratio |\n| --- | --- | --- |\n"
          f"| analytics.toml | {plain:.1f} | 1.00 |\n"
          f"| + snapshots, clips, history | {media:.1f} | {result['ratio_median']:.3f} "
          f"(runs {', '.join(f'{r:.2f}' for r in ratios)}) |\n\n"
          f"Per camera hour at the defaults: {hour['media_bytes'] / 1e6:.0f} MB of pictures and "
          f"clips ({hour['snapshots']} JPEGs, {hour['clips']} clips), "
          f"{hour['history_bytes'] / 1e6:.1f} MB of history")  # fmt: skip


if __name__ == "__main__":
    main()
