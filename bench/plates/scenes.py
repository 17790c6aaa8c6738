"""Generated plate scenes with exact truth: plates rendered (several formats, three fonts,
three colour schemes, 12-48 px high, tilted, blurred, some at night contrast) onto cut-outs
of the real cars of traffic.mp4 (``bench/accuracy/synth.py``'s), driven across the real
empty road, upscaled to 1280x720. A seed gives the same scene on every machine; seeds
from ``TUNING`` were looked at while tuning, from ``HELD_OUT`` are held out.

    scene = plate_scene(seed); clip = render(scene, media, folder)   # scene.cars: the truth
    crop, text = plate_crop(seed, index, height)                      # one vehicle, no video
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass, field
from pathlib import Path

import av
import cv2
import numpy as np

from bench.accuracy import synth

WIDTH, HEIGHT, FPS = 1280, 720, 24
TUNING = 1000
"""Seeds from here (to ``HELD_OUT``) were looked at while the node's rules were made (lines
joined, text cut by a border left unread) and the scenes fixed (tracker swaps, night)."""
HELD_OUT = 5000
"""Seeds from here are held out: never looked at before the benchmark's run."""
CARS = ("blue", "black", "white", "silver", "west", "grey")
"""synth.CROPS' cars."""
FORMATS = ("LL-DDDD", "DLLL DDD", "LLDD LLL", "DDD-LLL", "LLL DDDD", "DDLLDD")
"""L a letter, D a digit; other characters printed as they are."""
LETTERS = "".join(c for c in string.ascii_uppercase if c not in "IOQ")  # as real plates
FONTS = (cv2.FONT_HERSHEY_SIMPLEX, cv2.FONT_HERSHEY_DUPLEX, cv2.FONT_HERSHEY_TRIPLEX)
SCHEMES = (((235, 235, 235), (25, 25, 25)), ((40, 200, 245), (20, 20, 20)),
           ((30, 30, 30), (235, 235, 235)))  # fmt: skip
"""(background, text) BGR: white, yellow, black plates."""
BANDS = ((12, 16), (16, 20), (20, 28), (28, 36), (36, 49))
"""Plate heights (px) reported apart: [low, high)."""


def band_of(height: int) -> str:
    low, high = next(b for b in BANDS if b[0] <= height < b[1])
    return f"{low}-{high - 1}"


@dataclass
class Car:
    text: str
    """As printed (separators kept)."""
    plate_h: int
    cutout: str
    font: int
    scheme: int
    tilt: float
    """Degrees."""
    blur: float
    """Gaussian sigma, plate pixels."""
    night: bool
    start: int
    """First frame it is in view."""
    lane_y: int
    speed: float
    """Pixels a frame (negative: leftwards)."""
    size: tuple[int, int] = (0, 0)
    """The cut-out's (width, height) as rendered (``render`` sets it)."""

    def box(self, frame: int) -> tuple[float, float, float, float] | None:
        """Where the car is on ``frame`` (x1, y1, x2, y2), None before it enters."""
        if frame < self.start or not self.size[0]:
            return None
        width, height = self.size
        moved = (frame - self.start) * self.speed
        x = -width * 0.9 + moved if self.speed > 0 else WIDTH - width * 0.1 + moved
        y = self.lane_y - height / 2
        return x, y, x + width, y + height

    @property
    def plate(self) -> str:
        """As the node reports it."""
        return "".join(c for c in self.text if c.isalnum())


@dataclass
class Scene:
    seed: int
    frames: int
    cars: list[Car] = field(default_factory=list)

    @property
    def split(self) -> str:
        return "held_out" if self.seed >= HELD_OUT else "tuning"


@functools.cache
def car_cutouts(media: Path) -> dict[str, np.ndarray]:
    """The cars of ``synth.CROPS`` (all from traffic.mp4: no other clip is read)."""
    wanted = {name: synth.CROPS[name] for name in CARS}
    frames: dict[int, np.ndarray] = {}
    with av.open(str(media / "traffic.mp4")) as container:
        last = max(index for _, index, *_ in wanted.values())
        for i, frame in enumerate(container.decode(video=0)):
            if any(index == i for _, index, *_ in wanted.values()):
                frames[i] = frame.to_ndarray(format="bgr24")
            if i >= last:
                break
    return {
        name: frames[index][y1:y2, x1:x2].copy()
        for name, (_, index, x1, y1, x2, y2) in wanted.items()
    }


def plate_text(rng: np.random.Generator) -> str:
    pattern = FORMATS[rng.integers(len(FORMATS))]
    return "".join(
        LETTERS[rng.integers(len(LETTERS))] if c == "L"
        else str(rng.integers(10)) if c == "D"
        else c
        for c in pattern
    )  # fmt: skip


def plate_image(text: str, height: int, font: int, scheme: int) -> np.ndarray:
    """The plate, ``height`` px high, its text ~0.62 of that, a dark border."""
    background, ink = SCHEMES[scheme]
    thickness = max(1, round(height / 14))
    scale = cv2.getFontScaleFromHeight(font, max(4, round(height * 0.62)), thickness)
    (width, text_h), _ = cv2.getTextSize(text, font, scale, thickness)
    pad = max(2, height // 4)
    plate = np.full((height, width + 2 * pad, 3), background, np.uint8)
    baseline = (height + text_h) // 2
    cv2.putText(plate, text, (pad, baseline), font, scale, ink, thickness, cv2.LINE_AA)
    cv2.rectangle(plate, (0, 0), (plate.shape[1] - 1, height - 1), (10, 10, 10), 1)
    return plate


def _plated(car: Car, cutouts: dict[str, np.ndarray], rng_seed: int) -> np.ndarray:
    """The car's cut-out scaled to ~4.5 plate heights, the plate on it: tilted, blurred, and
    at night dim and noisy (an unlit plate: low contrast, sensor noise)."""
    body = cutouts[car.cutout]
    factor = car.plate_h * 4.5 / body.shape[0]
    body = cv2.resize(body, (round(body.shape[1] * factor), round(body.shape[0] * factor)),
                      interpolation=cv2.INTER_CUBIC)  # fmt: skip
    plate = plate_image(car.text, car.plate_h, car.font, car.scheme)
    if car.night:
        noise = np.random.default_rng(rng_seed).normal(0, 6, plate.shape)
        plate = np.clip(plate.astype(np.float32) * 0.4 + 20 + noise, 0, 255).astype(np.uint8)
    h, w = plate.shape[:2]
    if w > body.shape[1] - 8:  # a long plate on a short car: the car stretched to hold it
        body = cv2.resize(body, (w + 16, body.shape[0]))
    cx, cy = body.shape[1] / 2, body.shape[0] * 0.62
    matrix = cv2.getRotationMatrix2D((w / 2, h / 2), car.tilt, 1.0)
    matrix[:, 2] += (cx - w / 2, cy - h / 2)
    mask = cv2.warpAffine(np.full((h, w), 255, np.uint8), matrix, body.shape[1::-1])
    warped = cv2.warpAffine(plate, matrix, body.shape[1::-1], flags=cv2.INTER_LINEAR)
    if car.blur > 0:
        warped = cv2.GaussianBlur(warped, (0, 0), car.blur)
        mask = cv2.GaussianBlur(mask, (0, 0), car.blur)
    alpha = mask[..., None].astype(np.float32) / 255
    out = alpha * warped + (1 - alpha) * body
    return np.clip(out, 0, 255).astype(np.uint8)


def random_car(rng: np.random.Generator, height: int | None = None) -> Car:
    return Car(
        text=plate_text(rng),
        plate_h=int(height if height is not None else rng.integers(12, 49)),
        cutout=CARS[rng.integers(len(CARS))],
        font=FONTS[rng.integers(len(FONTS))],
        scheme=int(rng.integers(len(SCHEMES))),
        tilt=float(rng.uniform(-5, 5)),
        blur=float(rng.uniform(0.0, 0.9)),
        night=bool(rng.random() < 0.25),
        start=0,
        lane_y=0,
        speed=0.0,
    )


def plate_scene(seed: int, cars: int = 3, seconds_each: float = 4.0) -> Scene:
    """``cars`` vehicles, one after another, each crossing the frame in ~``seconds_each``,
    all one way (rightwards on even seeds): one entering where the last leaves would make
    the tracker's job, not the reader's, the test."""
    rng = np.random.default_rng(seed)
    scene = Scene(seed, frames=0)
    at = 0
    for _ in range(cars):
        car = random_car(rng)
        car.lane_y = int(rng.integers(260, 420))
        car.speed = (WIDTH * 1.4 / (seconds_each * FPS)) * (1 if seed % 2 == 0 else -1)
        car.start = at
        at += round(seconds_each * FPS * 0.8)
        scene.cars.append(car)
    scene.frames = at + round(seconds_each * FPS * 0.6)
    return scene


def render(scene: Scene, media: Path, folder: Path) -> Path:
    """The scene's H.264 clip in ``folder``."""
    cutouts = car_cutouts(media)
    road = cv2.resize(synth.background(media), (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
    looks = [_plated(car, cutouts, scene.seed * 100 + k) for k, car in enumerate(scene.cars)]
    for car, look in zip(scene.cars, looks, strict=True):
        car.size = (look.shape[1], look.shape[0])
    clip = folder / f"plates-{scene.seed}.mp4"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"crf": "20"})
        (stream.width, stream.height), stream.pix_fmt = (WIDTH, HEIGHT), "yuv420p"
        for frame in range(scene.frames):
            canvas = road.copy()
            for car in scene.cars:
                box = car.box(frame)
                if box is not None:
                    synth._paste(canvas, looks[scene.cars.index(car)], box[0], box[1])
            for packet in stream.encode(av.VideoFrame.from_ndarray(canvas, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return clip


def plate_crop(media: Path, seed: int, height: int) -> tuple[np.ndarray, Car]:
    """One vehicle with a plate ``height`` px high on the road, as a node's crop of it would
    be (the car and a little road around it), JPEG-compressed like a decoded frame."""
    rng = np.random.default_rng(seed)
    car = random_car(rng, height)
    look = _plated(car, car_cutouts(media), seed)
    road = cv2.resize(synth.background(media), (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
    margin = 12
    h, w = look.shape[:2]
    canvas = cv2.resize(road[200 : 200 + h + 2 * margin, 100 : 100 + w + 2 * margin],
                        (w + 2 * margin, h + 2 * margin))  # fmt: skip
    synth._paste(canvas, look, margin, margin)
    ok, data = cv2.imencode(".jpg", canvas, [cv2.IMWRITE_JPEG_QUALITY, 88])
    assert ok
    return cv2.imdecode(data, cv2.IMREAD_COLOR), car
