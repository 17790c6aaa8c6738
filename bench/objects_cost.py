"""What a classifier on every car costs: configs/attributes.toml (traffic analytics with a
``classify`` node on each tracked car, bus and truck) against the same graph without it,
run alternately in one call on the traffic clip looped (--seconds of video), fps = frames /
the time from every stage open to the end (``fps_with_startup``: over the whole wall time),
and the classifier node's counts (crops, model calls, most calls per object).

    python bench/objects_cost.py --runs 5 --seconds 40

The classifier is ResNet18-shaped: with no network, torchvision's ResNet18 of random weights
exported to ONNX (the compute of the manifest's ``resnet18``; what it says is not the point
here); ``--model`` takes another. Writes bench/results/objects_cost.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

REPO = Path(__file__).resolve().parent.parent
ATTRIBUTES = REPO / "configs" / "attributes.toml"
RATE = 24000 / 1001  # traffic.mp4


def resnet18(path: Path) -> Path:
    """torchvision's ResNet18 (random weights, eval mode) as ONNX, batch dynamic."""
    import torch
    import torchvision

    model = torchvision.models.resnet18(weights=None).eval()
    torch.onnx.export(
        model, (torch.zeros(1, 3, 224, 224),), str(path), input_names=["images"],
        output_names=["logits"], dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
        dynamo=False,
    )  # fmt: skip
    return path


def detect_only(folder: Path) -> Path:
    """attributes.toml without its classify node."""
    text = ATTRIBUTES.read_text(encoding="utf-8")
    old = "track ! kind ! analytics"
    assert old in text, "configs/attributes.toml's links changed: update this bench"
    start = text.index("[nodes.kind]")
    text = text[:start] + text[text.index("[nodes.", start + 1) :]
    path = folder / "detect_only.toml"
    path.write_text(text.replace(old, "track ! analytics"), encoding="utf-8")
    return path


def run(config: Path, model: Path, frames: int, folder: Path, classify: bool) -> dict[str, Any]:
    sets = []
    if classify:
        sets = [f"kind.model={model}", "kind.labels_file=" + str(REPO / "models" / "imagenet.txt")]
    result = harness.pipeline_run(config, frames, folder, sets)
    measured: dict[str, Any] = {
        "fps": round(result["fps"], 2),
        "fps_with_startup": round(frames / result["wall_s"], 2),
        "to_ready_s": result["startup"]["to_ready_s"],
    }
    if classify:
        kind = result["stages"]["kind"]
        measured.update(
            {
                key: kind[key]
                for key in (
                    "crops",
                    "model_calls",
                    "results",
                    "too_small",
                    "at_edge",
                    "most_calls_per_object",
                )
            }
        )
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=40.0, help="of video per run")
    parser.add_argument("--model", type=Path, help="an ONNX classifier (default: ResNet18)")
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "objects_cost.json")
    args = parser.parse_args()
    frames = round(args.seconds * RATE)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        model = args.model or resnet18(folder / "resnet18.onnx")
        plain = detect_only(folder)
        count = iter(range(10**6))
        runs = harness.alternate(
            {
                "detect_only": lambda: run(plain, model, frames, folder / f"r{next(count)}", False),
                "classified": lambda: run(
                    ATTRIBUTES, model, frames, folder / f"r{next(count)}", True
                ),
            },
            args.runs,
        )
    fps = {name: harness.summary(r["fps"] for r in results) for name, results in runs.items()}
    with_startup = [
        c["fps_with_startup"] / d["fps_with_startup"]
        for d, c in zip(runs["detect_only"], runs["classified"], strict=True)
    ]
    ratios = [
        c["fps"] / d["fps"] for d, c in zip(runs["detect_only"], runs["classified"], strict=True)
    ]
    result = {
        "video_s_per_run": args.seconds,
        "frames_per_run": frames,
        "model": "torchvision ResNet18 (random weights), ONNX"
        if not args.model
        else str(args.model),
        "fps": fps,
        "ratio": harness.summary(ratios, digits=3),
        "ratio_with_startup": harness.summary(with_startup, digits=3),
        "classifier": runs["classified"],
    }
    harness.record(args.out, result)
    print(harness.table(
        ["graph", "median fps", "ratio"],
        [["attributes.toml without the classifier", fps["detect_only"]["median"], "1.00"],
         ["attributes.toml (ResNet18 on every vehicle)", fps["classified"]["median"],
          f"{result['ratio']['median']} (runs {', '.join(map(str, result['ratio']['runs']))})"]],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
