"""How well the plates node reads, on generated scenes (bench/plates/scenes.py) it was never
tuned on, and against rapidocr's own pipeline on the same crops.

    python bench/plates_accuracy.py --scenes 30 --crops 40

- ``scenes``: ``--scenes`` held-out scenes (seeds from 5000; and as many of the tuning
  seeds, from 1000), three cars each with a plate 12-48 px high, through configs/plates.toml as
  shipped: per car, whether its first ``plate`` event has its text exactly, the characters
  right (1 - edit distance / length), and cars with no plate event; by plate height; for
  every car, and for the cars the detector and tracker followed (``TRACKED`` frames).
- ``crops``: ``--crops`` held-out vehicle crops per height band; the node's own reading
  (``PlatesStage.read_pictures``: its detector input, lines joined, the recogniser) against
  ``rapidocr.RapidOCR`` (the same two models, its own pre- and post-processing) on the same
  crops: exact reads, character accuracy, and milliseconds per plate (this CPU, one after the
  other in one process).

Writes bench/results/plates.json and prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness
from bench.plates import scenes

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "plates.toml"
MEDIA = Path(os.environ.get("VAPIPE_ASSETS", REPO.parent / "shared")) / "media"
TRACKED = 12
"""A car the detector and tracker followed for at least this many frames (half a second)
counts as tracked: one that was not had no chance to be read, whatever the reader does."""


def char_accuracy(truth: str, read: str | None) -> float:
    from vapipe.stages.plates.text import distance

    if not read:
        return 0.0
    return max(0.0, 1 - distance(truth, read) / len(truth))


def scene_reads(seed: int, folder: Path) -> list[dict[str, Any]]:
    """Each car of the scene: its plate, height, and the node's first read of it."""
    scene = scenes.plate_scene(seed)
    clip = scenes.render(scene, MEDIA, folder)
    events = folder / f"events-{seed}.jsonl"
    command = [sys.executable, "-m", "vapipe", str(CONFIG), "--set", f"cam.uri={clip}",
               "--set", f"events.path={events}", "--set", "video.path=" + str(folder / "v.mp4"),
               "--set", "history.path=" + str(folder / f"h-{seed}.db"), "--log-level",
               "warning", "--no-progress"]  # fmt: skip
    subprocess.run(command, cwd=folder, check=True, capture_output=True, text=True)
    first: dict[int, str] = {}
    seen = [0] * len(scene.cars)
    for line in events.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "frame":  # frames on which a tracked vehicle lay on the car
            for index in {car_at(scene, event["seq"], d["xyxy"]) for d in event["detections"]
                          if d.get("track_id", -1) > 0} - {None}:  # fmt: skip
                seen[index] += 1
        elif event["event"] == "plate":
            index = car_at(scene, event["seq"], event["box"])
            if index is not None:
                first.setdefault(index, event["plate"])
    return [
        {"plate": car.plate, "height": car.plate_h, "night": car.night, "read": first.get(k),
         "tracked": seen[k] >= TRACKED}
        for k, car in enumerate(scene.cars)
    ]  # fmt: skip


def car_at(scene: scenes.Scene, seq: int, xyxy: list[float]) -> int | None:
    """The car whose box holds the centre of ``xyxy`` on frame ``seq``."""
    cx, cy = (xyxy[0] + xyxy[2]) / 2, (xyxy[1] + xyxy[3]) / 2
    for index, car in enumerate(scene.cars):
        box = car.box(seq)
        if box and box[0] <= cx <= box[2] and box[1] <= cy <= box[3]:
            return index
    return None


def by_band(rows: list[dict[str, Any]], read_key: str = "read") -> dict[str, dict[str, Any]]:
    bands: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        bands[scenes.band_of(row["height"])].append(row)
    out = {}
    for low, high in scenes.BANDS:
        name = f"{low}-{high - 1}"
        got = bands.get(name, [])
        if not got:
            continue
        out[name] = {
            "plates": len(got),
            "exact": round(sum(r[read_key] == r["plate"] for r in got) / len(got), 3),
            "chars": round(sum(char_accuracy(r["plate"], r[read_key]) for r in got) / len(got), 3),
            "unread": sum(r[read_key] is None for r in got),
        }
    return out


def at_least(rows: list[dict[str, Any]], height: int, read_key: str = "read") -> dict[str, Any]:
    got = [r for r in rows if r["height"] >= height]
    return {
        "plates": len(got),
        "exact": round(sum(r[read_key] == r["plate"] for r in got) / max(len(got), 1), 3),
    }


def crops_compared(count: int) -> dict[str, Any]:
    from rapidocr import RapidOCR

    from vapipe.stages.plates.config import PlatesConfig
    from vapipe.stages.plates.stage import PlatesStage
    from vapipe.stages.plates.text import PlateShape, normalised

    shape = PlateShape()
    made = []
    for band, (low, high) in enumerate(scenes.BANDS):
        for k in range(count):  # every height of the band in turn
            seed = scenes.HELD_OUT + 1000 * (band + 1) + k
            made.append(scenes.plate_crop(MEDIA, seed, low + k % (high - low)))
    pictures = [picture for picture, _ in made]
    node = PlatesStage("plates", PlatesConfig())
    node.read_pictures(pictures[:8])  # loaded and warm, as in a running graph
    start = time.perf_counter()
    found = [f for i in range(0, len(pictures), 8) for f in node.read_pictures(pictures[i : i + 8])]
    node_s = time.perf_counter() - start
    engine = RapidOCR(params={"Global.use_cls": False, "Global.log_level": "error"})
    engine(pictures[0])
    start = time.perf_counter()
    theirs = []
    for picture in pictures:
        result = engine(picture)
        texts = list(result.txts or ())
        scores = list(result.scores or ())
        # Its best plate-shaped line; else its lines joined (a plate read as two words).
        candidates = [(normalised(t), s) for t, s in zip(texts, scores, strict=True)]
        if texts:
            candidates.append((normalised("".join(texts)), min(scores)))
        fitting = [c for c in candidates if shape.fits(c[0])]
        theirs.append(max(fitting, key=lambda c: c[1])[0] if fitting else None)
    rapid_s = time.perf_counter() - start
    rows = [
        {"plate": car.plate, "height": car.plate_h, "node": f.read.text if f else None,
         "rapidocr": theirs[k]}
        for k, ((_, car), f) in enumerate(zip(made, found, strict=True))
    ]  # fmt: skip
    return {
        "crops": len(rows),
        "node": {"by_band": by_band(rows, "node"), "at_least_20px": at_least(rows, 20, "node"),
                 "ms_per_plate": round(1000 * node_s / len(rows), 1)},
        "rapidocr": {"by_band": by_band(rows, "rapidocr"),
                     "at_least_20px": at_least(rows, 20, "rapidocr"),
                     "ms_per_plate": round(1000 * rapid_s / len(rows), 1)},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=30, help="held out (and as many tuning)")
    parser.add_argument("--crops", type=int, default=40, help="per height band")
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "plates.json")
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "plates: reads on generated scenes and crops"}
    with tempfile.TemporaryDirectory() as scratch:
        for split, first in (("held_out", scenes.HELD_OUT), ("tuning", scenes.TUNING)):
            rows = [
                row for seed in range(first, first + args.scenes)
                for row in scene_reads(seed, Path(scratch))
            ]  # fmt: skip
            tracked = [row for row in rows if row["tracked"]]
            result[f"scenes_{split}"] = {
                "cars": len(rows), "by_band": by_band(rows), "at_least_20px": at_least(rows, 20),
                "tracked": {"cars": len(tracked), "by_band": by_band(tracked),
                            "at_least_20px": at_least(tracked, 20)},
            }  # fmt: skip
            print(f"{split}: {result[f'scenes_{split}']}", flush=True)
    result["crops_held_out"] = crops_compared(args.crops)
    harness.record(args.out, result)
    print("\n| plate height (px) | cars | exact | characters | no plate event |")
    print("| --- | --- | --- | --- | --- |")
    for band, row in result["scenes_held_out"]["by_band"].items():
        print(f"| {band} | {row['plates']} | {row['exact']:.3f} | {row['chars']:.3f} "
              f"| {row['unread']} |")  # fmt: skip
    crops = result["crops_held_out"]
    print("\n| plate height (px) | node exact | node chars | rapidocr exact | rapidocr chars |")
    print("| --- | --- | --- | --- | --- |")
    for band, mine in crops["node"]["by_band"].items():
        theirs = crops["rapidocr"]["by_band"][band]
        print(f"| {band} | {mine['exact']:.3f} | {mine['chars']:.3f} | {theirs['exact']:.3f} "
              f"| {theirs['chars']:.3f} |")  # fmt: skip
    print(
        f"\nms per plate: node {crops['node']['ms_per_plate']}, "
        f"rapidocr {crops['rapidocr']['ms_per_plate']}"
    )


if __name__ == "__main__":
    main()
