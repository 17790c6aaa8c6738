"""One object, one identity, on scenes nobody tuned on: the second generator's scenes
(bench/accuracy/random_scenes.py, seeds 100-107 for tuning, 200-207 held out) scored as the
accuracy benchmark scores its own (count error, HOTA, IDF1, ID switches), for the tracker's
defaults and with ``class_aware = false`` (the default before class groups), both models;
and, on every generated scene of both generators, the tracks that carry two classes of
different groups (by the label they show, and by the true objects their boxes cover).

    python bench/accuracy_random.py     # after bench/accuracy_bench.py; merges into its report

Writes the ``random`` part of bench/results/accuracy.json and its section of accuracy.md.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import accuracy_bench, harness  # noqa: E402
from bench.accuracy import runners  # noqa: E402
from bench.accuracy.clips import Clip, generated, random_generated  # noqa: E402
from bench.accuracy.random_scenes import POOL  # noqa: E402
from bench.accuracy.score import Box, iou  # noqa: E402
from vapipe.stages.infer.names import COCO_NAMES  # noqa: E402
from vapipe.stages.track.classes import ClassGroups  # noqa: E402
from vapipe.stages.track.config import AppearanceConfig, TrackConfig  # noqa: E402
from vapipe.stages.track.stage import TrackStage  # noqa: E402

CROP_CLASS = {crop: label for crop, label, *_ in POOL} | {
    "silver": "car", "pickup": "truck", "person": "person", "dog": "dog"}  # fmt: skip
"""The COCO class of each cut-out, for the true objects of either generator."""


def settings() -> dict[str, dict]:
    defaults = accuracy_bench.settings_of("defaults")
    unaware = {**defaults, "track": {**defaults["track"], "class_aware": False}}
    looks = AppearanceConfig().model_dump(include={"model", "proximity", "match", "reject"})
    return {
        "defaults": defaults,
        "class_aware false": unaware,
        "appearance": {**defaults, "track": {**defaults["track"], "appearance": looks}},
        "ultralytics": {"ultralytics": True, "conf": defaults["conf"]},
    }


def tracks_and_labels(
    clip: Clip, model: str, setting: dict
) -> tuple[list[list[Box]], list[dict[int, str]]]:
    """Per frame: the tracks' boxes, and the class name each track shows."""
    dets = clip.detections(model)
    labels: list[dict[int, str]] = []
    if setting.get("ultralytics"):
        found = runners.ultralytics(clip, dets, setting["conf"], labels)
        assert found is not None
        return found[1], labels
    boxes = []
    for frame in runners._tracked(clip, dets, setting["track"], setting["conf"], TrackStage):
        held = frame.detections[frame.detections.tracked()]
        boxes.append(runners._boxes(held))
        labels.append({int(t): held.class_name(int(c))
                       for t, c in zip(held.track_id, held.class_id, strict=True)})  # fmt: skip
    return boxes, labels


def mixed_tracks(clip: Clip, model: str, setting: dict) -> dict[str, int]:
    """Tracks whose shown label went from one class group to another, and tracks whose boxes
    covered (IoU >= 0.5) true objects of two groups: a person's track on a dog."""
    groups = ClassGroups(TrackConfig.model_validate(setting.get("track", {})).confusable)
    assert clip.scene is not None and clip.boxes is not None
    movers = clip.scene.movers
    kinds: dict[int, set[int]] = {}
    covered: dict[int, set[int]] = {}
    tracks, labels = tracks_and_labels(clip, model, setting)
    for found, named, truth in zip(tracks, labels, clip.boxes, strict=True):
        for track, name in named.items():
            kinds.setdefault(track, set()).add(
                int(groups.of([COCO_NAMES.index(name)], COCO_NAMES)[0])
            )
        if not found or not truth:
            continue
        true_boxes = [row[1:] for row in truth]
        true_kinds = groups.of(
            [COCO_NAMES.index(CROP_CLASS[movers[row[0] - 1].crop]) for row in truth], COCO_NAMES
        ).tolist()
        overlap = iou(np.array([b[1:] for b in found], float), np.array(true_boxes, float))
        for k, (track, *_) in enumerate(found):
            best = int(overlap[k].argmax())
            if overlap[k, best] >= 0.5:
                covered.setdefault(track, set()).add(true_kinds[best])
    return {
        "tracks": len(kinds),
        "two_group_labels": sum(len(v) > 1 for v in kinds.values()),
        "two_group_objects": sum(len(v) > 1 for v in covered.values()),
    }


def summed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A setting's totals over some scenes: count error, HOTA, IDF1, ID switches, two-group
    tracks and the track node's mean time per frame (this machine, one thread)."""
    results = [r["result"] for r in rows]
    timed = [r["track_ms"] for r in results if "track_ms" in r]
    return {
        **accuracy_bench.totals(results),
        "two_group_labels": sum(r["mixed"]["two_group_labels"] for r in results),
        "two_group_objects": sum(r["mixed"]["two_group_objects"] for r in results),
        "hota": sum(r["tracking"]["HOTA"] for r in results) / max(len(results), 1),
        "idsw": sum(r["tracking"]["IDSW"] for r in results),
        "track_ms": sum(timed) / len(timed) if timed else None,
    }


def main() -> None:
    out = REPO / "bench" / "results" / "accuracy.json"
    report = json.loads(out.read_text())
    scenes = random_generated()
    written = generated()
    for clip in scenes + written:
        for model in accuracy_bench.MODELS:
            clip.detections(model)
    chosen = settings()
    results: list[dict[str, Any]] = []
    for (name, setting), clip, model in itertools.product(
        chosen.items(), scenes, accuracy_bench.MODELS
    ):
        result = accuracy_bench.evaluate(clip, model, setting)
        result["mixed"] = mixed_tracks(clip, model, setting)
        results.append({"clip": clip.name, "split": clip.split, "model": model,
                         "setting": name, "what": clip.scene.what if clip.scene else "",
                         "result": result})  # fmt: skip
    purity = {
        name: {
            split: dict(
                sum(
                    (Counter(mixed_tracks(c, m, setting)) for c in written if c.split == split
                     for m in accuracy_bench.MODELS),
                    Counter(),
                )
            )
            for split in ("tuning", "held-out")
        }
        for name, setting in chosen.items()
    }  # fmt: skip
    totals = {
        name: {
            f"{family}{split}": summed([r for r in results if r["setting"] == name
                                        and r["split"] == split
                                        and r["clip"].startswith("crowd") == bool(family)])
            for family in ("", "crowd ")
            for split in ("tuning", "held-out")
        }
        for name in chosen
    }  # fmt: skip
    report["random"] = {"results": results, "totals": totals, "written_scenes_mixed": purity,
                        "settings": chosen}  # fmt: skip
    out.write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(accuracy_bench.markdown(report))
    print(harness.table(
        ["setting", "split", "count error", "mean IDF1", "ID switches", "two-group tracks"],
        [[name, split, t["error"], round(t["idf1"], 1), t["idsw"], t["two_group_objects"]]
         for name, by in totals.items() for split, t in by.items()],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
