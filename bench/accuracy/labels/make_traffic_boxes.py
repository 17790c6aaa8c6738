"""How traffic_boxes.csv was made (kept to show it, and to redo it; the CSV is the label).

traffic.mp4 is a fixed camera over four straight lanes where cars keep their lane and nearly
their speed. Per lane (by box centre row), the boxes of both sample models at score >= 0.1 are
linked frame to frame with hindsight (nearest centre within 35 px of the predicted one, gaps up
to 12 frames), tracks shorter than 10 frames or moving under 60 px are dropped, and each car's
centre is fitted over time (quadratic), its width taken from the boxes that are wholly inside
the picture and its rows from the median. Boxes less than a third in the picture are left out.
The result was drawn over 16 frames (0-235 and 260-479) and checked by eye; the crossing frames
it implies agree within 1 frame with a slit-scan of the column x = 320 (traffic_crossings.csv).

    python bench/accuracy/labels/make_traffic_boxes.py > bench/accuracy/labels/traffic_boxes.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.accuracy.clips import media
from bench.accuracy.detect import detect

LANES = {"top": (0, 30, -1), "lane2": (30, 100, -1), "lane3": (130, 210, 1), "lane4": (210, 300, 1)}
WIDTH, FRAMES = 640, 480


def boxes() -> np.ndarray:
    """Rows of (frame, centre x, centre y, width, height, score, x1, y1, x2, y2)."""
    rows = []
    for model in ("yolox-nano", "yolov8n"):
        for frame, dets in enumerate(detect(media() / "traffic.mp4", model, [2, 5, 7])):
            for (x1, y1, x2, y2), score in zip(dets.xyxy.tolist(), dets.score.tolist(),
                                               strict=True):  # fmt: skip
                if score >= 0.1:
                    rows.append((frame, (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, score,
                                 x1, y1, x2, y2))  # fmt: skip
    return np.array(rows)


def link(points: np.ndarray, sign: int) -> list[np.ndarray]:
    tracks: list[dict] = []
    for frame in range(FRAMES):
        here = points[points[:, 0] == frame]
        clusters: list[np.ndarray] = []
        for row in here[np.argsort(-here[:, 5])]:  # one box per car: the best of both models
            if all(abs(row[1] - c[1]) > 30 for c in clusters):
                clusters.append(row)
        used: set[int] = set()
        for track in sorted(tracks, key=lambda t: -len(t["rows"])):
            last = track["rows"][-1]
            if frame - last[0] > 12:
                continue
            predicted = last[1] + track["v"] * (frame - last[0])
            near = [(abs(c[1] - predicted), k) for k, c in enumerate(clusters)
                    if k not in used and abs(c[1] - predicted) < 35]  # fmt: skip
            if near:
                k = min(near)[1]
                used.add(k)
                speed = (clusters[k][1] - last[1]) / (frame - last[0])
                track["v"] = 0.7 * track["v"] + 0.3 * speed if len(track["rows"]) > 2 else speed
                track["rows"].append(clusters[k])
        tracks += [{"rows": [c], "v": sign * 8.0} for k, c in enumerate(clusters) if k not in used]
    return [np.array(t["rows"]) for t in tracks
            if len(t["rows"]) >= 10 and abs(t["rows"][-1][1] - t["rows"][0][1]) >= 60]  # fmt: skip


def main() -> None:
    points = boxes()
    cars = []
    for lane, (low, high, sign) in LANES.items():
        for rows in link(points[(points[:, 2] >= low) & (points[:, 2] < high)], sign):
            cars.append((lane, rows))
    cars.sort(key=lambda car: car[1][0, 0])
    out = csv.writer(sys.stdout)
    out.writerow(["frame", "object", "x1", "y1", "x2", "y2", "lane"])
    for number, (lane, r) in enumerate(cars, 1):
        inside = (r[:, 6] > 3) & (r[:, 8] < WIDTH - 3)
        width = np.median(r[inside, 3]) if inside.sum() >= 3 else r[:, 3].max()
        top, bottom = np.median(r[:, 7]), np.median(r[:, 9])
        # A box cut by the picture's edge is centred on its inner edge minus half a car.
        centre = np.where(inside, r[:, 1], np.where(r[:, 6] <= 3, r[:, 8] - width / 2,
                                                    r[:, 6] + width / 2))  # fmt: skip
        fit = np.polyfit(r[:, 0], centre, 2 if len(r) > 20 else 1)
        for frame in range(int(r[0, 0]), int(r[-1, 0]) + 1):
            x = np.polyval(fit, frame)
            x1, x2 = max(x - width / 2, 0), min(x + width / 2, WIDTH)
            if x2 - x1 >= 0.3 * width:
                out.writerow([frame, number, round(x1, 1), round(top, 1), round(x2, 1),
                              round(bottom, 1), lane])  # fmt: skip


if __name__ == "__main__":
    main()
