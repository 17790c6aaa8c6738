"""The generated scenes (rendered by synth.py), each in the tuning or the held-out set, and
each kind of trouble in both with different objects, speeds and places: low contrast and
motion blur, one car hiding another, paths crossing on the line, someone walking along the
line, a stop inside a zone, a vehicle called car and truck in turn; and issue 30's: an object
leaving at an edge as another enters there, queues, fragment and duplicate boxes, walkers of
several sizes at two resolutions, diagonal crossings near the line's ends."""

from __future__ import annotations

from bench.accuracy.synth import Fragment, Mover, Scene, crop_size

Path = list[tuple[float, float] | None]
CAR, TRUCK, PERSON = 2, 7, 0


def _straight(x0: float, x1: float, y: float, start: int, frames: int, total: int) -> Path:
    step = (x1 - x0) / max(frames - 1, 1)
    return [
        (x0 + step * (i - start), y) if start <= i < start + frames else None for i in range(total)
    ]


def _walk(x0: float, y: float, speed: float, start: int, total: int, sway: float = 0.0) -> Path:
    """From x0 at ``speed`` px per frame, swinging ``sway`` px either side every 4 frames (a
    walker's box swings with the legs)."""
    return [
        (x0 + speed * (i - start) + (sway if ((i - start) // 4) % 2 else -sway), y)
        if i >= start else None
        for i in range(total)
    ]  # fmt: skip


def _by_anchor(mover: Mover, anchors: list[tuple[float, float] | None]) -> Mover:
    """Place the mover so that its bottom-centre (the counting anchor) follows ``anchors``."""
    w, h = crop_size(mover)
    mover.path = [None if a is None else (a[0] - w / 2, a[1] - h) for a in anchors]
    return mover


def _diagonal(at: tuple[float, float], step: tuple[float, float], before: int, after: int,
              start: int, total: int) -> list[tuple[float, float] | None]:  # fmt: skip
    """Anchor positions through ``at`` (reached ``before`` frames after ``start``), moving
    ``step`` per frame."""
    x, y = at
    path: list[tuple[float, float] | None] = [None] * total
    for k in range(-before, after):
        if 0 <= start + before + k < total:
            t = k + 0.5  # half a frame either side of the line: no frame sits on it
            path[start + before + k] = (x + step[0] * t, y + step[1] * t)
    return path


def _first_seven() -> list[Scene]:
    n = 200
    low = [
        Mover("black", _straight(-150, 660, 140, 0, 90, n), contrast=0.7, blur=9),
        Mover("silver", _straight(-160, 650, 225, 30, 100, n)),
        Mover("blue", _straight(-160, 650, 140, 95, 90, n), contrast=0.6, blur=13),
        Mover("grey", _straight(650, -150, 25, 20, 70, n), contrast=0.7, blur=11),
        Mover("white", _straight(-160, 650, 225, 120, 75, n), contrast=0.8, blur=7),
        Mover("west", _straight(650, -150, 25, 110, 80, n), contrast=0.6, blur=9),
    ]
    hide = [
        Mover("blue", _straight(-150, 660, 160, 0, 160, 160)),
        Mover("grey", _straight(-150, 660, 150, 30, 80, 160), flip=True, over=True),
    ]
    cross = [
        Mover("blue", _straight(-150, 650, 150, 10, 110, 140)),
        Mover("west", _straight(650, -150, 150, 10, 110, 140), over=True),
    ]
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
    held = "held-out"
    return [
        Scene("low_contrast_blur", "six cars, faded and motion-blurred", n, low),
        Scene("overtaking", "a fast car passes over a slow one at the line", 160, hide),
        Scene("crossing_paths", "two cars, one each way, cross on the line", 140, cross,
              split=held),
        Scene("along_the_line", "one walks along the line, one crosses and returns", 240,
              along),
        Scene("stop_in_zone", "a car stops 3 s in the zone, one drives through", 200, zone,
              zone_dwell_s=2.0, split=held),
        Scene("class_flip", "two pickups the detector calls car or truck", 150, flip,
              split=held),
    ]  # fmt: skip


def _handovers() -> list[Scene]:
    # A person leaves at the left edge; a dog enters there 10 frames later.
    person_dog = [
        Mover(
            "person",
            _walk(560, 130, -6, 0, 99)[:99] + [None] * 121,
            height=120,
            flip=True,
            label="person",
        ),
        Mover("dog", [None] * 109 + _walk(-32, 160, 6, 0, 111), height=90, label="dog"),
    ]
    # A car leaves at the right edge, a person walks in there 8 frames later; a car leaves at
    # the left edge and another drives in there, the other way, 6 frames later.
    cars_person = [
        Mover("blue", _straight(100, 594, 150, 0, 62, 210), label="car"),
        Mover(
            "person",
            [None] * 70 + _walk(624, 110, -5, 0, 133) + [None] * 7,
            height=110,
            flip=True,
            label="person",
        ),
        Mover("west", _straight(500, -98, 30, 0, 75, 210), label="car"),
        Mover("black", _straight(-100, 650, 40, 81, 94, 210), label="car"),
    ]
    return [
        Scene("edge_handover_dog", "a person leaves at the left edge, a dog enters there", 220,
              person_dog),
        Scene("edge_handover_cars", "a car leaves right, a person enters there; a car leaves"
              " left, another enters there", 210, cars_person, split="held-out"),
    ]  # fmt: skip


def _queues() -> list[Scene]:
    cars = [
        Mover(crop, _straight(-160 - 165 * k, 650, 150, 0, round((810 + 165 * k) / 7), 190),
              label="car")
        for k, crop in enumerate(("blue", "white", "silver", "black"))
    ]  # fmt: skip
    people = [
        Mover("person", _walk(650 + 30 * k, 130 + 5 * k, -4, 0, 210, sway=2), height=110,
              flip=bool(k % 2), label="person")
        for k in range(5)
    ]  # fmt: skip
    return [
        Scene("queue_cars", "four cars bumper to bumper in one lane", 190, cars),
        Scene("queue_people", "five people in a queue, each half behind the next", 210, people,
              split="held-out"),
    ]  # fmt: skip


def _fragments() -> list[Scene]:
    cars = [
        Mover("blue", _straight(-150, 650, 150, 0, 100, 140), label="car"),
        Mover("west", _straight(650, -150, 40, 20, 100, 140), label="car"),
    ]
    car_pieces = [
        Fragment(0, range(35, 66), (0.05, 0.0, 0.6, 0.7), 0.35, CAR),  # the cab
        Fragment(0, range(40, 60), (0.0, 0.0, 1.0, 0.95), 0.32, TRUCK),  # a duplicate
        Fragment(1, range(55, 86), (0.0, 0.1, 0.45, 0.9), 0.31, CAR),  # the bonnet
    ]
    people = [
        Mover("person", _walk(100, 150, 4, 0, 170, sway=3), height=120, label="person"),
        Mover(
            "person", _walk(560, 100, -4, 20, 170, sway=3), height=150, flip=True, label="person"
        ),
    ]
    person_pieces = [
        Fragment(0, range(40, 75), (0.0, 0.3, 0.35, 0.75), 0.33, PERSON),  # a sleeve
        Fragment(0, range(45, 70), (0.2, 0.0, 0.8, 0.22), 0.36, PERSON),  # the head
        Fragment(1, range(65, 100), (0.05, 0.0, 0.95, 0.4), 0.3, PERSON),  # head and shoulders
        Fragment(1, range(70, 95), (0.55, 0.25, 1.0, 0.7), 0.34, PERSON),  # an arm
    ]
    return [
        Scene("fragments_cars", "two cars with a cab, bonnet and truck box of their own", 140,
              cars, fragments=car_pieces),
        Scene("fragments_people", "two walkers with sleeve, head, arm and shoulders boxes",
              170, people, fragments=person_pieces, split="held-out"),
    ]  # fmt: skip


def _walkers(name: str, heights: tuple[int, ...], along: int, scale: int, split: str) -> Scene:
    """Walkers of several sizes cross the line, their boxes swinging 5% of their height
    either side; one walks down the line, swinging 6% of its height either side of it; one
    walks up to the line and turns back 10% of its height short of it."""
    total = 200
    movers = []
    bottoms = (120, 230, 335)
    for k, height in enumerate(heights):
        w = crop_size(Mover("person", [], height=height))[0]
        right = k % 2 == 0
        x0 = 320 - w / 2 + (-150 if right else 150)
        movers.append(Mover("person", _walk(x0, bottoms[k] - height, 3 if right else -3,
                                            10 * k, total, sway=0.05 * height),
                            height=height, flip=not right, label="person"))  # fmt: skip
    w = crop_size(Mover("person", [], height=along))[0]
    swing = 0.06 * along
    down = [(320 - w / 2 + (swing if (i // 4) % 2 else -swing), -along * 0.6 + 1.5 * i)
            for i in range(total)]  # fmt: skip
    movers.append(Mover("person", down, height=along, label="person"))
    short = 320 - 0.1 * heights[0]  # the turning walker's anchor gets no nearer than this
    w0 = crop_size(Mover("person", [], height=heights[0]))[0]
    there = [(short - 180 + 3 * i - w0 / 2, 280 - heights[0]) for i in range(60)]
    movers.append(Mover("person", [None] * 40 + there + there[::-1] + [None] * 40,
                        height=heights[0], label="person"))  # fmt: skip
    what = f"walkers {'/'.join(map(str, heights))} px tall cross at {360 * scale}p"
    return Scene(name, what, total, movers, scale=scale, split=split)


def _diagonals() -> list[Scene]:
    total = 150
    a = [
        _by_anchor(Mover("blue", [], label="car"),
                   _diagonal((320, 104), (8, -14), 14, 8, 5, total)),
        _by_anchor(Mover("west", [], label="car"),
                   _diagonal((320, 256), (-8, 14), 14, 8, 50, total)),
        _by_anchor(Mover("person", [], height=90, label="person"),
                   _diagonal((320, 92), (5, -3), 30, 25, 80, total)),
    ]  # fmt: skip
    b = [
        _by_anchor(Mover("black", [], label="car"),
                   _diagonal((320, 146), (9, -14), 14, 8, 5, total)),
        _by_anchor(Mover("dog", [], height=80, label="dog"),
                   _diagonal((320, 294), (6, 16), 14, 6, 50, total)),
        _by_anchor(Mover("white", [], label="car"),
                   _diagonal((320, 308), (8, 6), 20, 20, 90, total)),
    ]  # fmt: skip
    return [
        Scene("diagonal_ends", "steep crossings just inside each end; one just past the top",
              total, a, span=(100, 260)),
        Scene("diagonal_ends_b", "a car and a dog cross steeply near the ends; one just past",
              total, b, span=(140, 300), split="held-out"),
    ]  # fmt: skip


SCENES: list[Scene] = [
    *_first_seven(),
    *_handovers(),
    *_queues(),
    *_fragments(),
    _walkers("walkers_360", (70, 120, 180), 100, 1, "tuning"),
    _walkers("walkers_720", (60, 100, 160), 120, 2, "tuning"),
    _walkers("walkers_360_b", (80, 130, 170), 110, 1, "held-out"),
    _walkers("walkers_720_b", (65, 110, 150), 90, 2, "held-out"),
    *_diagonals(),
]
