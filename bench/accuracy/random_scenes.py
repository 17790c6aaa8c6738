"""The second scene generator: scenes drawn from a seed, not written for a rule. Real cut-outs
from the sample media (cars and a pickup of traffic.mp4, people cut from the crowd of
people.mp4 with parts of their neighbours in the cut, a horse of horses.mp4, the dog of
dog.jpg) enter at a random edge at a random time, cross the picture in a straight line at a
random speed and leave at another edge; a random half are pasted over the others, so paths
cross and objects hide one another. The truth (boxes, crossings of the line, classes) comes
from the paths, as synth.py derives it for the written scenes.

Seeds 100-107 are for tuning, 200-207 are held out: nothing was chosen by looking at them."""

from __future__ import annotations

import numpy as np

from bench.accuracy.synth import HEIGHT, WIDTH, Mover, Scene, crop_size

FRAMES = 240
POOL = [
    # (cut-out, COCO name, heights to draw it at (None: as cut), faces right as cut)
    ("blue", "car", None, True),
    ("black", "car", None, True),
    ("white", "car", None, True),
    ("west", "car", None, False),
    ("grey", "car", None, False),
    ("pickup", "truck", None, False),
    ("person", "person", (90, 170), True),
    ("person2", "person", (90, 170), True),
    ("dog", "dog", (60, 110), True),
    ("horse", "horse", (60, 110), True),
]
CLASSES = [0, 2, 5, 7, 15, 16, 17, 18, 19]
"""What the detector keeps on these scenes: people, vehicles, and the animals it mixes up
(cat, dog, horse, sheep, cow)."""
SEEDS = {"tuning": range(100, 108), "held-out": range(200, 208)}
CROWD_SEEDS = {"tuning": range(150, 154), "held-out": range(250, 254)}
"""The seeds of ``crowd_scene``: people crossing one another, told apart by their looks."""
_PEOPLE = [k for k, (_, label, *_) in enumerate(POOL) if label == "person"]
_EDGES = ("left", "right", "top", "bottom")


def _point(rng: np.random.Generator, edge: str, size: tuple[float, float]) -> tuple[float, float]:
    """A top-left corner that puts a ``size`` box just outside ``edge``, anywhere along it."""
    w, h = size
    if edge in ("left", "right"):
        x = -w if edge == "left" else WIDTH
        return x, float(rng.uniform(0, HEIGHT - h))
    y = -h if edge == "top" else HEIGHT
    return float(rng.uniform(0, WIDTH - w)), y


def random_scene(seed: int, split: str) -> Scene:
    rng = np.random.default_rng(seed)
    movers = []
    for _ in range(int(rng.integers(5, 9))):
        crop, label, heights, faces_right = POOL[int(rng.integers(len(POOL)))]
        mover = Mover(crop, [], label=label, over=bool(rng.random() < 0.5))
        if heights is not None:
            mover.height = int(rng.integers(*heights))
        size = crop_size(mover)
        entry = _EDGES[int(rng.integers(4))]
        leave = _EDGES[int(rng.choice([k for k in range(4) if _EDGES[k] != entry]))]
        (x0, y0), (x1, y1) = _point(rng, entry, size), _point(rng, leave, size)
        mover.flip = (x1 < x0) == faces_right  # facing the way it goes
        start = int(rng.integers(0, FRAMES - 40))
        length = int(rng.integers(50, 170))
        share = [(i - start) / (length - 1) for i in range(FRAMES)]
        mover.path = [
            (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t) if 0 <= t <= 1 else None for t in share
        ]
        movers.append(mover)
    what = ", ".join(m.label for m in movers)
    return Scene(f"random_{seed}", f"seed {seed}: {what}", FRAMES, movers, split=split)


def crowd_scene(seed: int, split: str) -> Scene:
    """People only, each in clothes of their own colour (``Mover.hue``), entering at the
    left or right edge and leaving at the other within one band of the picture, so that
    their paths cross and their boxes overlap: the scenes where looks can tell who is who."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(6, 10))
    hues = (np.arange(count) * 180 // count + int(rng.integers(180))) % 180
    movers = []
    for hue in rng.permutation(hues).tolist():
        crop, label, heights, faces_right = POOL[int(rng.choice(_PEOPLE))]
        assert heights is not None
        mover = Mover(crop, [], label=label, over=bool(rng.random() < 0.5), hue=int(hue))
        mover.height = int(rng.integers(*heights))
        width, height = crop_size(mover)
        rightward = bool(rng.random() < 0.5)
        x0, x1 = (-width, WIDTH) if rightward else (WIDTH, -width)
        band = HEIGHT / 2 - height / 2
        y0, y1 = (float(band + rng.uniform(-40, 40)) for _ in range(2))
        mover.flip = (x1 < x0) == faces_right
        start = int(rng.integers(0, FRAMES - 120))
        length = int(rng.integers(110, 200))
        share = [(i - start) / (length - 1) for i in range(FRAMES)]
        mover.path = [
            (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t) if 0 <= t <= 1 else None for t in share
        ]
        movers.append(mover)
    return Scene(f"crowd_{seed}", f"seed {seed}: {count} people, each in other colours",
                 FRAMES, movers, split=split)  # fmt: skip


def random_scenes() -> list[Scene]:
    drawn = [random_scene(seed, split) for split, seeds in SEEDS.items() for seed in seeds]
    crowds = [crowd_scene(seed, split) for split, seeds in CROWD_SEEDS.items() for seed in seeds]
    return drawn + crowds
