"""How right the counts and tracks are: vapipe's tracker and line rule, before and after
tuning, and Ultralytics' ByteTrack + ObjectCounter, on the same detections, scored against
hand-checked labels of traffic.mp4 and generated scenes with exact truth (bench/accuracy/).

    pip install --no-deps trackeval    # the MOTChallenge metrics (HOTA, IDF1, MOTA)
    pip install --no-deps ultralytics lap   # optional: the Ultralytics rows (torch, pyyaml)
    python bench/accuracy_bench.py                 # writes bench/results/accuracy.{json,md}
    python bench/accuracy_bench.py --tune          # also searches the settings (minutes)

Detections come from the real pipeline (source, preprocess, infer, NMS) at score >= 0.05, once
per clip and model, cached in the temp folder; each setting then applies its own threshold.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.accuracy import runners, score  # noqa: E402
from bench.accuracy.clips import Clip, generated, people, traffic  # noqa: E402
from bench.accuracy.detect import RECT  # noqa: E402
from bench.cameras_bench import camera_seconds  # noqa: E402
from vapipe.stages.analytics.config import AnalyticsConfig  # noqa: E402
from vapipe.stages.track.config import AppearanceConfig, TrackConfig  # noqa: E402

MODELS = ("yolox-nano", "yolov8n")
SPLITS = ("tuning", "held-out")
DEFAULT_CONF = tomllib.loads((REPO / "configs" / "analytics.toml").read_text())["nodes"]["nms"][
    "conf"
]  # what the config's nms keeps
TRACK_GRID = {
    "high_score": [0.3, 0.4, 0.5],
    "new_track_score": [0.3, 0.4, 0.5, 0.6],
    "confirm_frames": [1, 2, 3],
    "lost_s": [1.0, 2.0],
    "match_iou": [0.2, 0.3],
    "conf": [0.1, 0.2],
}
INTERVALS = (2, 3, 4)
"""``infer.interval`` settings measured beside the defaults (1: every frame)."""
MOTION_INTERVALS = (1, 2, 3, 4)
"""The motion node in front of the detector, alone (1) and with these intervals."""
RECT_INTERVALS = (1, 3, 4)
"""``infer.rect`` (inputs padded to 32, not to the square), alone (1) and with intervals."""
CAMERA_INTERVALS = (2, 3, 4)
"""The cameras benchmark's intervals: its counts are these clips' at ``interval_s`` = N/15
(its frame rate; on 24 fps clips, interval N detects more often)."""
RECT_MODELS = ("yolox-nano",)
"""The sample models that take rect inputs (YOLOv8n's export fixes its anchor count)."""


def summary_only(name: str) -> bool:
    """Settings the report gives as totals only (the JSON has each clip)."""
    return (
        name.startswith(("interval ", "every "))
        or "motion" in name
        or "rect" in name
        or name == "appearance"
    )


LINE_GRID = {
    "min_crossing_frames": [1, 2, 3, 4],
    "min_crossing_px": [0, 4, 8, 12, 16],
    "min_crossing_depth": [0.0, 0.1, 0.15, 0.2, 0.25, 0.3],
}


def line_defaults() -> dict:
    return {k: AnalyticsConfig.model_fields[k].default for k in LINE_GRID}


def settings_of(name: str) -> dict:
    if name == "before":
        return runners.BEFORE
    if name == "defaults":  # spelled out, so that the report says what they were
        track = TrackConfig().model_dump(
            include={
                "high_score",
                "new_track_score",
                "confirm_frames",
                "confirm_score",
                "lost_s",
                "match_iou",
            }
        )
        return {"track": track, "analytics": line_defaults(), "conf": DEFAULT_CONF}
    raise ValueError(name)


def evaluate(clip: Clip, model: str, setting: dict, with_tracking: bool = True) -> dict:
    if setting.get("rect") and model not in RECT_MODELS:
        return {}
    dets = clip.detections(model + (RECT if setting.get("rect") else ""))
    if setting.get("ultralytics"):
        found = runners.ultralytics(clip, dets, setting["conf"])
    elif setting.get("linezone"):
        found = runners.linezone(clip, dets, setting["track"], setting["conf"])
    else:
        found = runners.vapipe(
            clip, dets, setting["track"], setting["analytics"], setting["conf"],
            interval=setting.get("interval", 1), motion=setting.get("motion", False),
            interval_s=setting.get("interval_s"), seconds=(seconds := []),
        )  # fmt: skip
    if found is None:
        return {}
    events, tracks = found
    if clip.labelled:  # a dog counted as a person is a miss and an overcount
        events = [{**e, "direction": f"{e['direction']} {e.get('class_name', '')}"}
                  if e["event"] == "line_cross" else e for e in events]  # fmt: skip
    result: dict[str, Any] = {
        "crossings": score.crossings(events, clip.truth(), clip.optional),
        "classes": score.class_counts(events),
    }
    if not setting.get("ultralytics") and not setting.get("linezone"):
        result["zones"] = score.zones(events, clip.visits, clip.frames, clip.dwell_frames)
        result["track_ms"] = 1000 * sum(seconds) / max(len(seconds), 1)
    if with_tracking and clip.boxes is not None:
        result["tracking"] = score.tracking(clip.boxes, tracks)
    return result


def totals(results: list[dict]) -> dict[str, float]:
    """Summed count error, overcount and misses, and mean IDF1, over clips and models."""
    error = sum(d["error"] for r in results for d in r["crossings"].values())
    over = sum(d["overcount"] for r in results for d in r["crossings"].values())
    missed = sum(d["missed"] for r in results for d in r["crossings"].values())
    idf1 = [r["tracking"]["IDF1"] for r in results if "tracking" in r]
    return {"error": error, "overcount": over, "missed": missed,
            "idf1": sum(idf1) / max(len(idf1), 1)}  # fmt: skip


def _score_setting(args: tuple[list[Clip], dict, bool]) -> tuple[dict, dict]:
    clips, setting, tracking = args
    results = [evaluate(c, m, setting, tracking) for c in clips for m in MODELS]
    return setting, totals(results)


def tune(clips: list[Clip]) -> tuple[dict, list[dict]]:
    """Tracker thresholds first (line rule at its defaults), then the line rule on the best
    tracker. Best: least count error, then least overcount, then highest IDF1."""
    candidates = []
    for values in itertools.product(*TRACK_GRID.values()):
        chosen = dict(zip(TRACK_GRID, values, strict=True))
        if chosen["new_track_score"] < chosen["high_score"]:
            continue
        conf = chosen.pop("conf")
        if conf > chosen["high_score"]:
            continue
        candidates.append({"track": chosen, "analytics": line_defaults(), "conf": conf})
    ranked = _rank(clips, candidates)
    best = ranked[0]["setting"]
    lines = [{**best, "analytics": dict(zip(LINE_GRID, v, strict=True))}
             for v in itertools.product(*LINE_GRID.values())]  # fmt: skip
    ranked_lines = _rank(clips, lines)
    return ranked_lines[0]["setting"], ranked[:15] + ranked_lines[:10]


def _rank(clips: list[Clip], settings: list[dict]) -> list[dict]:
    with ProcessPoolExecutor() as pool:
        scored = list(pool.map(_score_setting, [(clips, s, True) for s in settings]))
    scored.sort(key=lambda item: (item[1]["error"], item[1]["overcount"], -item[1]["idf1"]))
    return [{"setting": s, **t} for s, t in scored]


def markdown(report: dict) -> str:
    lines = [
        "# Accuracy: counts and tracks against the truth", "",
        "`python bench/accuracy_bench.py` on " + _machine(report["machine"]) + ". Count error per "
        "direction: |counted - true| (0 when a car still on the line at the clip's end is "
        "counted or not); overcount: counted crossings with no true one of that direction "
        "within 1 s. Tracking metrics from TrackEval at IoU 0.5 over the labelled boxes.", "",
        "Split: " + ", ".join(f"**{k}**: {', '.join(v)}" for k, v in report["split"].items())
        + ". The settings are chosen on the tuning clips only.", "",
        "| setting | split | count error (sum) | overcount | missed | mean IDF1 |",
        "| --- | --- | --- | --- | --- | --- |",
        *[f"| {name} | {split} | {t['error']} | {t['overcount']} | {t['missed']} | "
          f"{t['idf1']:.1f} |" for name, by in report["totals"].items()
          for split, t in by.items()], "",
        "| clip | split | model | setting | direction | true | counted | error | overcount |"
        " missed | HOTA | IDF1 | IDSW | tracks/object |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for row in report["results"]:
        if summary_only(row["setting"]):  # the totals say it; the JSON has each
            continue
        tracking = row["result"].get("tracking", {})
        for direction, c in row["result"]["crossings"].items():
            lines.append(
                f"| {row['clip']} | {row['split']} | {row['model']} | {row['setting']} | "
                f"{direction} | "
                f"{c['truth']} | {c['counted']} | {c['error']} | {c['overcount']} | "
                f"{c['missed']} | {tracking.get('HOTA', '')} | {tracking.get('IDF1', '')} | "
                f"{tracking.get('IDSW', '')} | {tracking.get('tracks_per_object', '')} |"
            )
    lines += ["", "| setting | what |", "| --- | --- |"]
    lines += [f"| {name} | {_describe(s)} |" for name, s in report["settings"].items()]
    if report.get("search"):
        lines += [
            "", "The search (`--tune`): the best tracker settings, then the best line rules "
            "on the best tracker.", "",
            "| count error | overcount | mean IDF1 | settings |", "| --- | --- | --- | --- |",
        ]  # fmt: skip
        for row in report["search"]:
            lines.append(
                f"| {row['error']} | {row['overcount']} | {row['idf1']:.1f} | "
                f"{_describe(row['setting'])} |"
            )
    zones = [r for r in report["results"]
             if "zones" in r["result"] and not summary_only(r["setting"])]  # fmt: skip
    lines += ["", "| clip | model | setting | zone entries true / counted | dwell events "
              "true / counted |", "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for row in zones:
        z = row["result"]["zones"]
        lines.append(
            f"| {row['clip']} | {row['model']} | {row['setting']} | {z['enter']['truth']} / "
            f"{z['enter']['counted']} | {z['dwell']['truth']} / {z['dwell']['counted']} |"
        )
    if report.get("random"):
        lines += ["", random_section(report["random"])]
    return "\n".join(lines) + "\n"


def _machine(machine: str | dict) -> str:
    """The machine line: as the report held it, or from the harness's record of it."""
    if isinstance(machine, str):
        return machine
    cpus, python = machine.get("cpus", "?"), machine.get("python", "")
    return f"{machine.get('processor', '')}, {cpus} CPUs, Python {python}"


def _pair(mixed: int | dict) -> str:
    """Two-group tracks as ``objects / labels`` (older reports: objects only)."""
    if isinstance(mixed, int):
        return str(mixed)
    return f"{mixed.get('two_group_objects', 0)} / {mixed.get('two_group_labels', 0)}"


def random_section(random: dict) -> str:
    """The second generator's section (bench/accuracy_random.py)."""
    lines = [
        "## Scenes drawn from seeds (the second generator)", "",
        "`python bench/accuracy_random.py`: bench/accuracy/random_scenes.py's scenes, real "
        "cut-outs entering and leaving at random edges and times (seeds 100-107 tuning, 200-207 "
        "held out), and its crowds (*crowd*: 6-9 people crossing one band of the picture, each "
        "cut-out in clothes of its own colour, seeds 150-153 tuning, 250-253 held out), both "
        "models. *Two-group tracks*: tracks whose boxes covered true objects of two class "
        "groups (a person's track going on on a dog), and tracks whose shown label changed "
        "group; the covered objects also count the detector's own mistakes (the ones looked "
        "at, in random_104: a truck called a person, so a person's track went on on it; one "
        "cut-out pasted over another). *appearance*: the defaults with `[nodes.track."
        "appearance]` (person-reid, its defaults); *track ms*: the track node's mean time per "
        "frame on this machine, the re-id model's crops included (on the CPU). Ultralytics: "
        "its ByteTrack (bytetrack.yaml) on the same detections.", "",
        "| setting | scenes | count error | overcount | missed | mean HOTA | mean IDF1 | ID "
        "switches | two-group tracks (objects / labels) | track ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for name, by in random["totals"].items():
        for split, t in by.items():
            lines.append(
                f"| {name} | {split} | {t['error']} | {t['overcount']} | {t['missed']} | "
                f"{t['hota']:.1f} | {t['idf1']:.1f} | {t['idsw']} | "
                f"{t['two_group_objects']} / {t['two_group_labels']} | "
                f"{'' if t.get('track_ms') is None else round(t['track_ms'], 2)} |"
            )
    lines += ["", "Two-group tracks (objects / labels) on the written scenes (scenes.py), both "
              "models: " + "; ".join(
                  f"{name}: " + ", ".join(f"{split} {_pair(n)}" for split, n in by.items())
                  for name, by in random["written_scenes_mixed"].items()) + ".", "",
              "| scene | split | model | setting | objects | HOTA | IDF1 | IDSW | count error |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for row in random["results"]:
        tracking = row["result"].get("tracking", {})
        error = sum(c["error"] for c in row["result"]["crossings"].values())
        lines.append(
            f"| {row['clip']} | {row['split']} | {row['model']} | {row['setting']} | "
            f"{row['what'].split(': ', 1)[-1]} | {tracking.get('HOTA', '')} | "
            f"{tracking.get('IDF1', '')} | {tracking.get('IDSW', '')} | {error} |"
        )
    return "\n".join(lines)


def _describe(setting: dict) -> str:
    if setting.get("interval_s"):
        extra = " behind the motion node" if setting.get("motion") else ""
        extra += " (YOLOX-Nano only, at rect inputs)" if setting.get("rect") else ""
        return f"the defaults{extra}, detecting once per {setting['interval_s']} s (interval_s)"
    if setting.get("ultralytics"):
        return f"Ultralytics ByteTrack (bytetrack.yaml) + ObjectCounter, NMS >= {setting['conf']}"
    if setting.get("linezone"):
        return "vapipe's tracks (defaults) counted by supervision's LineZone (its defaults)"
    if setting.get("rect"):
        every = setting.get("interval", 1)
        return "YOLOX-Nano only: the defaults at rect inputs (infer.rect)" + (
            f", detecting on one frame in {every}" if every > 1 else ""
        )
    if setting.get("motion"):
        every = setting.get("interval", 1)
        return "the defaults behind the motion node (its defaults)" + (
            f", detecting on one frame in {every}" if every > 1 else ""
        )
    if setting.get("interval"):
        return f"the defaults, detecting on one frame in {setting['interval']} (infer.interval)"
    keys = {**setting["track"], **setting["analytics"], "nms conf": setting["conf"]}
    return ", ".join(f"{k} {v}" for k, v in keys.items()) or "the defaults"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tune", action="store_true", help="search the settings first")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "accuracy")
    parser.add_argument(
        "--only",
        help="comma-separated settings to measure again, merged into the report at --out "
        "(e.g. 'motion,interval 3 + motion')",
    )
    args = parser.parse_args()
    clips = [traffic(), people(), *generated()]
    for clip in clips:
        for model in MODELS:
            clip.detections(model)  # fill the cache before the pool forks
    machine = f"{platform.machine()}, Python {platform.python_version()}"
    splits = {s: [c.name for c in clips if c.split == s] for s in SPLITS}
    report: dict[str, Any] = {"machine": machine, "split": splits, "results": [], "totals": {}}
    settings = {name: settings_of(name) for name in ("before", "defaults")}
    settings["ultralytics"] = {"ultralytics": True, "conf": DEFAULT_CONF}
    settings["linezone"] = {**settings["defaults"], "linezone": True}
    looks = AppearanceConfig().model_dump(include={"model", "proximity", "match", "reject"})
    looked = {**settings["defaults"]["track"], "appearance": looks}
    settings["appearance"] = {**settings["defaults"], "track": looked}
    for every in INTERVALS:  # infer.interval: the detector on one frame in N
        settings[f"interval {every}"] = {**settings["defaults"], "interval": every}
    for every in MOTION_INTERVALS:
        name = "motion" if every == 1 else f"interval {every} + motion"
        settings[name] = {**settings["defaults"], "interval": every, "motion": True}
    for every in RECT_INTERVALS:
        name = "rect" if every == 1 else f"interval {every} + rect"
        settings[name] = {**settings["defaults"], "interval": every, "rect": True}
    for every in CAMERA_INTERVALS:  # the cameras benchmark's rates, in seconds
        seconds = camera_seconds(every)
        settings[f"every {seconds:g} s"] = {**settings["defaults"], "interval_s": seconds}
        for extra in ("rect", "motion"):
            settings[f"every {seconds:g} s + {extra}"] = {
                **settings["defaults"], "interval_s": seconds, extra: True}  # fmt: skip
    if args.only:
        chosen = args.only.split(",")
        settings = {name: settings[name] for name in chosen}
        report = json.loads(args.out.with_suffix(".json").read_text())
        report["results"] = [r for r in report["results"] if r["setting"] not in chosen]
    if args.tune:
        best, ranked = tune([c for c in clips if c.split == "tuning"])
        settings["tuned"] = best
        report["search"] = ranked
    for name, setting in settings.items():
        rows: dict[str, list] = {s: [] for s in SPLITS}
        for clip, model in itertools.product(clips, MODELS):
            result = evaluate(clip, model, setting)
            if result:
                rows[clip.split].append(result)
                report["results"].append(
                    {
                        "clip": clip.name,
                        "split": clip.split,
                        "model": model,
                        "setting": name,
                        "result": result,
                    }
                )
        if any(rows.values()):
            report["totals"][name] = {s: totals(r) for s, r in rows.items()}
        report.setdefault("settings", {})[name] = setting
    by_name = {r["setting"] for r in report["results"]}
    for name in ("defaults", *(f"interval {every}" for every in RECT_INTERVALS if every > 1)):
        if name in by_name:  # the rect settings' comparison: the same model at square inputs
            rows = {
                s: [
                    r["result"]
                    for r in report["results"]
                    if r["setting"] == name and r["model"] in RECT_MODELS and r["split"] == s
                ]
                for s in SPLITS
            }
            report["totals"][f"{name} ({', '.join(RECT_MODELS)})"] = {
                s: totals(r) for s, r in rows.items()}  # fmt: skip
    report["track_defaults"] = TrackConfig().model_dump()
    harness.record(args.out.with_suffix(".json"), report)
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
