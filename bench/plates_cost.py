"""What reading plates costs: configs/plates.toml as shipped against the same graph without
its ``plates`` node, on a generated traffic scene with plates (bench/plates/scenes.py, seed
1000: three cars a scene, 1280x720) looped, run alternately in one call; fps = frames / the
time from every stage open to the end. Also the node's counts (crops, reads, plates).

    python bench/plates_cost.py --runs 5 --seconds 30 [--set KEY=VALUE ...] [--without-video]
        [--out FILE]

Writes bench/results/plates_cost.json (the GPU machine's: ``--out
bench/results/plates_cost_gpu.json``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness
from bench.plates import scenes

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "configs" / "plates.toml"
MEDIA = Path(os.environ.get("VAPIPE_ASSETS", REPO.parent / "shared")) / "media"
LINK = "track ! plates ! analytics"
VIDEO_LINK = '\n    "analytics ! video",'


def without_plates(text: str) -> str:
    """plates.toml's text without its plates node."""
    assert LINK in text, "configs/plates.toml's links changed: update this bench"
    start = text.index("[nodes.plates]")
    text = text[:start] + text[text.index("[nodes.", start + 1) :]
    return text.replace(LINK, "track ! analytics").replace('"plate", ', "")


def without_video(text: str) -> str:
    """plates.toml's text without its video sink: on a GPU machine the sink's one x264
    encoder (and the picture's download and colour conversion in its thread, where no node
    before it read the pixels) bounds the graph, not the node measured."""
    assert VIDEO_LINK in text, "configs/plates.toml's links changed: update this bench"
    start = text.index("[nodes.video]")
    end = text.find("\n[nodes.", start)
    text = text[:start] + (text[end + 1 :] if end >= 0 else "")
    return text.replace(VIDEO_LINK, "")


def run(config: Path, clip: Path, frames: int, folder: Path, sets: list[str]) -> dict[str, Any]:
    result = harness.pipeline_run(config, frames, folder, [f"cam.uri={clip}", *sets])
    measured: dict[str, Any] = {
        "fps": round(result["fps"], 2),
        "fps_with_startup": round(frames / result["wall_s"], 2),
        "det": result["stages"]["det"].get("provider"),
    }
    plates = result["stages"].get("plates")
    if plates:
        keys = ("provider", "crops", "reads", "plates", "mean_ms", "p95_ms")
        measured.update({key: plates.get(key) for key in keys})
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0, help="of video per run")
    parser.add_argument("--set", action="append", default=[], dest="sets",
                        help="NODE.KEY=VALUE for both graphs (plates.*: with it)")  # fmt: skip
    parser.add_argument("--without-video", action="store_true",
                        help="both graphs without the video sink (on a GPU machine its one "
                        "x264 encoder bounds the graph)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "plates_cost.json")
    args = parser.parse_args()
    frames = round(args.seconds * scenes.FPS)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        scene = scenes.plate_scene(scenes.TUNING)
        clip = scenes.render(scene, MEDIA, folder)
        shipped = CONFIG.read_text(encoding="utf-8")
        if args.without_video:
            shipped = without_video(shipped)
        plain, plated = folder / "no_plates.toml", folder / "plates.toml"
        plated.write_text(shipped, encoding="utf-8")
        plain.write_text(without_plates(shipped), encoding="utf-8")
        count = iter(range(10**6))
        # The graph without the node has no plates.* keys: a --set of one would stop it.
        others = [s for s in args.sets if not s.startswith("plates.")]
        runs = harness.alternate(
            {
                "without": lambda: run(plain, clip, frames, folder / f"w{next(count)}", others),
                "with": lambda: run(plated, clip, frames, folder / f"p{next(count)}", args.sets),
            },
            args.runs,
        )
    fps = {side: harness.summary([r["fps"] for r in rows]) for side, rows in runs.items()}
    pairs = [w["fps"] / p["fps"] for p, w in zip(runs["without"], runs["with"], strict=True)]
    result = {
        "benchmark": "plates node cost: configs/plates.toml with and without it",
        "scene": f"bench/plates/scenes.py seed {scenes.TUNING}, 1280x720, looped",
        "frames_per_run": frames,
        "sets": args.sets,
        "video_sink": not args.without_video,
        "fps": fps,
        "ratio_with_over_without": harness.ratio(fps["with"]["median"], fps["without"]["median"]),
        "ratio_of_pairs_median": round(harness.median(pairs), 3),
        "runs": runs,
    }
    harness.record(args.out, result)
    print("\n| graph | median fps | ratio |\n| --- | --- | --- |")
    print(f"| plates.toml without plates | {fps['without']['median']} | 1.00 |")
    print(f"| plates.toml | {fps['with']['median']} | {result['ratio_of_pairs_median']} |")


if __name__ == "__main__":
    main()
