"""Generated sequences with exact truth: cut-outs of real cars and a real pedestrian, taken
from the sample clips, moved on known paths over the real (empty) road of traffic.mp4, with
what breaks trackers and counters: low contrast and motion blur, one car hiding another, paths
crossing on the line, someone walking along the line, a stop inside a zone, a vehicle the
detector calls car and truck in turn.

Each scene writes an H.264 clip (the detector then runs on it like on any file) and its truth:
every object's box per frame, every line crossing and every zone visit, derived from the
paths with the same geometry the analytics use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import av
import cv2
import numpy as np
import shapely

from vapipe.stages.analytics.config import AnalyticsConfig
from vapipe.stages.analytics.geometry import compile_geometry

WIDTH, HEIGHT, FPS = 640, 360, 24
LINE = {"name": "road", "start": [320, 20], "end": [320, 340]}
CROSSED_PX = 20
"""A crossing, for the truth, goes from this far on one side to this far on the other (the
frame is where it passed the line): someone wandering a few pixels either side of the line is
walking along it, not crossing it."""
ZONE = {"name": "bay", "polygon": [[420, 110], [600, 110], [600, 330], [420, 330]]}
# Cut-outs: (clip, frame, x1, y1, x2, y2), boxes from bench/accuracy/labels/traffic_boxes.csv.
CROPS = {
    "blue": ("traffic", 200, 406, 148, 560, 214),  # eastbound, facing right; scored 0.81
    "black": ("traffic", 200, 2, 213, 153, 296),  # 0.69
    "white": ("traffic", 200, 100, 143, 254, 208),  # 0.47
    "silver": ("traffic", 30, 144, 224, 290, 285),  # 0.43 car, 0.38 truck: a weak one
    "west": ("traffic", 200, 432, 23, 574, 87),  # westbound, facing left; 0.78
    "grey": ("traffic", 200, 48, 27, 174, 82),  # westbound; 0.82
    "pickup": ("traffic", 436, 227, 5, 420, 80),  # westbound; called truck 0.41 or car 0.18
    "person": ("people", 0, 662, 201, 757, 444),
}


@dataclass
class Mover:
    """One object: a cut-out and its top-left corner per frame (None: not in the scene)."""

    crop: str
    path: list[tuple[float, float] | None]
    flip: bool = False
    height: int | None = None
    """Scale the cut-out to this height (pixels)."""
    contrast: float = 1.0
    """1: as cut; lower blends it towards the road."""
    blur: int = 0
    """Horizontal motion blur kernel (pixels)."""
    over: bool = False
    """Pasted last: hides the others where they overlap."""


@dataclass
class Scene:
    name: str
    what: str
    frames: int
    movers: list[Mover]
    zone_dwell_s: float | None = None
    truth: dict = field(default_factory=dict)


def _straight(x0: float, x1: float, y: float, start: int, frames: int, total: int) -> list:
    step = (x1 - x0) / max(frames - 1, 1)
    return [
        (x0 + step * (i - start), y) if start <= i < start + frames else None for i in range(total)
    ]


def _scenes() -> list[Scene]:
    n = 200
    low = [
        Mover("black", _straight(-150, 660, 140, 0, 90, n), contrast=0.7, blur=9),
        Mover("silver", _straight(-160, 650, 225, 30, 100, n)),
        Mover("blue", _straight(-160, 650, 140, 95, 90, n), contrast=0.6, blur=13),
        Mover("grey", _straight(650, -150, 25, 20, 70, n), contrast=0.7, blur=11),
        Mover("white", _straight(-160, 650, 225, 120, 75, n), contrast=0.8, blur=7),
        Mover("west", _straight(650, -150, 25, 110, 80, n), contrast=0.6, blur=9),
    ]
    # A fast car overtakes a slow one in the same band, passing over it near the line.
    hide = [
        Mover("blue", _straight(-150, 660, 160, 0, 160, 160)),
        Mover("grey", _straight(-150, 660, 150, 30, 80, 160), flip=True, over=True),
    ]
    # One each way in the same band: their boxes cross each other on the line.
    cross = [
        Mover("blue", _straight(-150, 650, 150, 10, 110, 140)),
        Mover("west", _straight(650, -150, 150, 10, 110, 140), over=True),
    ]
    # Someone walks down the line, wandering 7 px either side of it every few frames; another
    # crosses it left to right, waits, and comes back.
    width = 48  # the person cut-out at 120 px tall
    wander = [
        (320 - width / 2 + (7 if (i // 4) % 2 else -7), -60 + 1.6 * i) if i < 230 else None
        for i in range(240)
    ]
    back = (
        [(40 + 6 * i, 200) for i in range(80)]
        + [(520, 200)] * 60
        + [(520 - 6 * i, 200) for i in range(100)]
    )
    along = [
        Mover("person", wander, height=120),
        Mover("person", [(x, y) for x, y in back], height=120, flip=True),
    ]
    # A car stops in the zone for 3 s; another drives through it.
    stop = (
        [(-150 + 8 * i, 190) for i in range(72)]
        + [(426.0, 190)] * 72
        + [(426 + 8 * i, 190) for i in range(40)]
    )
    zone = [
        Mover("black", [*stop, *[None] * 16]),
        Mover("white", _straight(-160, 650, 180, 60, 100, 200)),
    ]
    flip = [
        Mover("pickup", _straight(650, -190, 20, 0, 90, 150)),
        Mover("pickup", _straight(-190, 650, 150, 50, 90, 150), flip=True),
    ]
    return [
        Scene("low_contrast_blur", "six cars, faded and motion-blurred", n, low),
        Scene("overtaking", "a fast car passes over a slow one at the line", 160, hide),
        Scene("crossing_paths", "two cars, one each way, cross on the line", 140, cross),
        Scene("along_the_line", "one walks along the line, one crosses and returns", 240,
              along),
        Scene("stop_in_zone", "a car stops 3 s in the zone, one drives through", 200, zone,
              zone_dwell_s=2.0),
        Scene("class_flip", "two pickups the detector calls car or truck", 150, flip),
    ]  # fmt: skip


def _cutouts(media: Path) -> dict[str, np.ndarray]:
    frames: dict[tuple[str, int], np.ndarray] = {}
    for clip, index, *_ in CROPS.values():
        if (clip, index) not in frames:
            with av.open(str(media / f"{clip}.mp4")) as container:
                for i, frame in enumerate(container.decode(video=0)):
                    if i == index:
                        frames[clip, index] = frame.to_ndarray(format="bgr24")
                        break
    return {
        name: frames[clip, index][y1:y2, x1:x2].copy()
        for name, (clip, index, x1, y1, x2, y2) in CROPS.items()
    }


def background(media: Path) -> np.ndarray:
    """The road without cars: the median of every sixth frame of traffic.mp4."""
    with av.open(str(media / "traffic.mp4")) as container:
        frames = [
            f.to_ndarray(format="bgr24") for i, f in enumerate(container.decode(video=0))
            if i % 6 == 0
        ]  # fmt: skip
    return np.median(np.stack(frames), axis=0).astype(np.uint8)


def _look(mover: Mover, crop: np.ndarray, road: np.ndarray) -> np.ndarray:
    image = crop[:, ::-1] if mover.flip else crop
    if mover.height is not None:
        scale = mover.height / image.shape[0]
        image = cv2.resize(image, (round(image.shape[1] * scale), mover.height))
    if mover.contrast != 1.0:
        grey = np.full_like(image, int(road.mean()))
        image = cv2.addWeighted(image, mover.contrast, grey, 1 - mover.contrast, 0)
    if mover.blur:
        kernel = np.full((1, mover.blur), 1.0 / mover.blur, np.float32)
        image = cv2.filter2D(image, -1, kernel, borderType=cv2.BORDER_REPLICATE)
    return image


def _paste(canvas: np.ndarray, image: np.ndarray, x: float, y: float) -> tuple | None:
    """Paste at (x, y); returns the visible box (x1, y1, x2, y2), or None when off screen."""
    h, w = image.shape[:2]
    x1, y1 = round(x), round(y)
    cx1, cy1 = max(x1, 0), max(y1, 0)
    cx2, cy2 = min(x1 + w, WIDTH), min(y1 + h, HEIGHT)
    if cx2 - cx1 < 0.3 * w or cy2 <= cy1:
        return None  # under a third in view: the labels of the real clip skip these too
    # Feathered edges: a hard rectangle of another patch of road is a cue real cars lack.
    alpha = _feather(h, w)[cy1 - y1 : cy2 - y1, cx1 - x1 : cx2 - x1, None]
    patch = image[cy1 - y1 : cy2 - y1, cx1 - x1 : cx2 - x1].astype(np.float32)
    under = canvas[cy1:cy2, cx1:cx2].astype(np.float32)
    canvas[cy1:cy2, cx1:cx2] = (alpha * patch + (1 - alpha) * under).round().astype(np.uint8)
    return (cx1, cy1, cx2, cy2)


def _feather(h: int, w: int, edge: int = 6) -> np.ndarray:
    ramp_y = np.clip(np.minimum(np.arange(h), np.arange(h)[::-1]) / edge, 0, 1)
    ramp_x = np.clip(np.minimum(np.arange(w), np.arange(w)[::-1]) / edge, 0, 1)
    return np.minimum(ramp_y[:, None], ramp_x[None, :]).astype(np.float32)


def _truth(boxes: list[list[tuple]]) -> dict:
    """Line crossings and zone visits of each object's bottom-centre anchor, from its path."""
    settings = AnalyticsConfig.model_validate({"lines": [LINE], "zones": [ZONE]})
    (line,), _ = compile_geometry(settings, "scene", WIDTH, HEIGHT)
    anchors: dict[int, list[tuple[int, float, float]]] = {}
    for frame, rows in enumerate(boxes):
        for obj, x1, _, x2, y2 in rows:
            anchors.setdefault(obj, []).append((frame, (x1 + x2) / 2, y2))
    crossings = []
    for obj, points in anchors.items():
        signed, along = line.sides(np.array([(x, y) for _, x, y in points]))
        side, over = 0, None
        for (frame, _, _), distance, position in zip(
            points, signed.tolist(), along.tolist(), strict=True
        ):
            now = 1 if distance > 0 else -1
            if now != side and (over is None or over[1] != now):
                over = (frame, now, position)  # came over here: a crossing if it goes on
            if abs(distance) >= CROSSED_PX and now != side:
                if side and over is not None and 0 <= over[2] <= 1:
                    crossings.append(
                        {"frame": over[0], "object": obj, "line": LINE["name"],
                         "direction": "in" if now > 0 else "out"}
                    )  # fmt: skip
                side, over = now, None
    return {"crossings": crossings, "visits": zone_visits(boxes, ZONE["polygon"])}


def zone_visits(boxes: list[list[tuple]], polygon: list) -> list[dict]:
    """Zone visits of boxed objects: their bottom-centre inside the polygon, enter to exit
    (a frame without the object's box ends its visit: it left the picture)."""
    shape = shapely.Polygon(polygon)
    inside: dict[int, int] = {}
    found = []
    for frame, rows in enumerate(boxes):
        here = set()
        for obj, x1, _, x2, y2 in rows:
            if shape.contains(shapely.Point((x1 + x2) / 2, y2)):
                here.add(obj)
                inside.setdefault(obj, frame)
        for obj in [o for o in inside if o not in here]:
            found.append({"object": obj, "enter": inside.pop(obj), "exit": frame})
    return found + [{"object": o, "enter": f, "exit": None} for o, f in inside.items()]


def render(scene: Scene, media: Path, folder: Path) -> Path:
    """Write the scene's clip into ``folder``; fill ``scene.truth`` (boxes, crossings,
    visits). Returns the clip's path."""
    cutouts = _cutouts(media)
    road = background(media)
    looks = [_look(m, cutouts[m.crop], road) for m in scene.movers]
    order = sorted(range(len(scene.movers)), key=lambda k: scene.movers[k].over)
    clip = folder / f"{scene.name}.mp4"
    boxes: list[list[tuple]] = []
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"crf": "18"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for frame in range(scene.frames):
            canvas = road.copy()
            rows = []
            for k in order:
                place = scene.movers[k].path[frame]
                box = None if place is None else _paste(canvas, looks[k], *place)
                if box is not None:
                    rows.append((k + 1, *box))
            boxes.append(rows)
            video = av.VideoFrame.from_ndarray(canvas, format="bgr24")
            for packet in stream.encode(video):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    scene.truth = {"boxes": boxes, **_truth(boxes)}
    return clip


SCENES: list[Scene] = _scenes()
