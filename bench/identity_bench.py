"""How well an embedding model tells people apart on the sample clip, and the ``match`` that
fits it (issue 63): the person crops of bench/accuracy/labels/people_identities.json (boxes of
people.mp4, each labelled by eye with who it is), embedded as an ``embed`` node embeds them,
every pair of crops compared.

    python bench/identity_bench.py --out bench/results/identities.json

- ``person-reid``: each box stretched to the model's input (``fit = "stretch"``, as the docs
  configure it);
- ``mobilefacenet``: the face YuNet finds in the upper half of each box (as configs/faces.toml
  finds it), aligned on its landmarks, where one of at least 24 pixels is found.

Genuine pairs are crops of one person at least 0.5 s apart; impostor pairs, crops of two
people. The ``match`` for a model is the lowest cosine similarity that at most 1% of impostor
pairs reach (the false-accept rate, FAR); the true-accept rate (TAR) is the share of genuine
pairs at or above it. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402

LABELS = REPO / "bench/accuracy/labels/people_identities.json"
APART = 12
"""Frames between the crops of a genuine pair (0.5 s at 23.976 frames/s)."""
FAR = 0.01
MIN_FACE = 24


def pictures(uri: str) -> dict[int, np.ndarray]:
    import av

    from vapipe.pipeline.assets import resolve_media

    with av.open(resolve_media(uri)) as container:
        return {i: f.to_ndarray(format="bgr24") for i, f in enumerate(container.decode(video=0))}


def person_vectors(boxes: list[dict], frames: dict[int, np.ndarray]) -> tuple[np.ndarray, list]:
    from vapipe.stages.crops.warp import CropRule, crop_box, cut, warp_matrix
    from vapipe.stages.objects.config import ObjectModelConfig
    from vapipe.stages.objects.model import ObjectModel
    from vapipe.stages.objects.outputs import unit

    model = ObjectModel("reid", ObjectModelConfig(model="person-reid", fit="stretch")).load()
    rule = CropRule(fit="stretch")
    crops = []
    for box in boxes:
        matrix = warp_matrix(crop_box(np.array(box["xyxy"]), rule), model.size, "stretch")
        crops.append(cut(frames[box["seq"]], matrix, model.size))
    vectors = unit(np.concatenate([model.run(np.stack(crops[i : i + 32]))
                                   for i in range(0, len(crops), 32)]))  # fmt: skip
    return vectors, boxes


def face_vectors(boxes: list[dict], frames: dict[int, np.ndarray]) -> tuple[np.ndarray, list]:
    """MobileFaceNet's vector of the face found in each box's upper half (boxes without a
    face of ``MIN_FACE`` pixels are left out)."""
    from vapipe.stages.objects.config import DetectInsideConfig, EmbedConfig
    from vapipe.stages.objects.detect_inside import DetectInsideStage
    from vapipe.stages.objects.embed import EmbedStage
    from vapipe.stages.objects.outputs import unit

    finder = DetectInsideStage("face", DetectInsideConfig(
        model="yunet", input_size=[128, 128], fit="square", conf=0.6))  # fmt: skip
    finder.loaded_model()
    embed = EmbedStage("faceid", EmbedConfig(model="mobilefacenet", on="face"))
    embed.bind(finder)
    model = embed.loaded_model()
    kept, crops = [], []
    for box in boxes:
        x1, y1, x2, y2 = (round(v) for v in box["xyxy"])
        upper = frames[box["seq"]][max(0, y1) : max(0, y1) + (y2 - y1) // 2, max(0, x1) : x2]
        if upper.size == 0:
            continue
        found = finder.best_in(upper)
        if found is None:
            continue
        face, points = found
        if min(face[2] - face[0], face[3] - face[1]) < MIN_FACE:
            continue
        matrix = embed._matrix(face, points)
        crops.append(cv2.warpAffine(upper, matrix, model.size, borderValue=(114, 114, 114)))
        kept.append(box)
    vectors = unit(model.run(np.stack(crops))) if crops else np.zeros((0, 0), np.float32)
    embed.close()
    finder.close()
    return vectors, kept


def scores(vectors: np.ndarray, boxes: list[dict]) -> dict[str, Any]:
    ids = np.array([b["id"] for b in boxes])
    seqs = np.array([b["seq"] for b in boxes])
    similar = vectors @ vectors.T
    upper = np.triu(np.ones_like(similar, dtype=bool), k=1)
    same = ids[:, None] == ids[None, :]
    apart = np.abs(seqs[:, None] - seqs[None, :]) >= APART
    genuine = similar[upper & same & apart]
    impostor = similar[upper & ~same]
    # The lowest similarity that at most FAR of the impostor pairs reach.
    ranked = np.sort(impostor)[::-1]
    allowed = int(np.floor(FAR * len(ranked)))
    match = float(ranked[allowed]) + 1e-6 if allowed < len(ranked) else float(ranked[-1])
    match = float(np.ceil(match * 100) / 100)  # what a config says: two decimals, at or above

    def at(threshold: float) -> dict[str, float]:
        return {
            "tar": round(float((genuine >= threshold).mean()), 4),
            "far": round(float((impostor >= threshold).mean()), 4),
        }

    same_frame = impostor[(np.abs(seqs[:, None] - seqs[None, :]) == 0)[upper & ~same]]
    return {
        "crops": len(boxes),
        "identities": len(set(ids.tolist())),
        "genuine_pairs": int(genuine.size),
        "impostor_pairs": int(impostor.size),
        "genuine_median": round(float(np.median(genuine)), 3),
        "impostor_median": round(float(np.median(impostor)), 3),
        "impostor_same_frame": {
            "pairs": int(same_frame.size),
            "range": [round(float(same_frame.min()), 3), round(float(same_frame.max()), 3)]
            if same_frame.size
            else None,
            "median": round(float(np.median(same_frame)), 3) if same_frame.size else None,
        },
        "match_at_far_1pct": match,
        "at_match": at(match),
        "at_0.45": at(0.45),
        "at_0.8": at(0.8),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="person-reid,mobilefacenet")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    labels = json.loads(LABELS.read_text())
    frames = pictures("sample:people")
    report: dict[str, Any] = {"labels": str(LABELS.relative_to(REPO)), "far": FAR, "models": {}}
    for name in args.models.split(","):
        make = person_vectors if name == "person-reid" else face_vectors
        vectors, kept = make(labels["boxes"], frames)
        report["models"][name] = scores(vectors, kept) if len(kept) > 1 else {"crops": 0}
        print(name, json.dumps(report["models"][name]), flush=True)
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
