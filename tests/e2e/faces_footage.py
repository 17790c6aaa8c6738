"""Footage with exact truth for face recognition, made from the people of people.mp4: the
head and shoulders of three pedestrians pasted on a plain background, drifting slowly, and a
gallery holding the pictures of two of them. The third is a stranger."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np

from tests.conftest import ASSETS

PEOPLE = ASSETS / "media" / "people.mp4"
YUNET = ASSETS / "models" / "yunet_n_dynamic.onnx"
# (seq, box) of one pedestrian in people.mp4, found by the sample pipeline (yolox-nano, track).
GREY_HAIR = {200: (476, 139, 798, 444)}
HAT = {80: (346, 213, 483, 447)}
STRANGER = {120: (87, 203, 229, 448)}
WIDTH, HEIGHT = 960, 480


@dataclass(frozen=True)
class Walker:
    name: str
    """The gallery name it must get (``unknown`` for the stranger)."""
    picture: np.ndarray
    left: int
    top: int

    def box(self, seq: int) -> tuple[int, int, int, int]:
        """Its rectangle in frame ``seq`` (it drifts 1 px a frame to the right)."""
        height, width = self.picture.shape[:2]
        return (self.left + seq, self.top, self.left + seq + width, self.top + height)


def portrait(image: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """Head and shoulders of the person in ``box``: around the best face OpenCV's own YuNet
    detector finds there, so that each picture shows one face."""
    x1, y1, x2, y2 = box
    crop = image[y1:y2, x1:x2]
    detector = cv2.FaceDetectorYN.create(str(YUNET), "", (crop.shape[1], crop.shape[0]), 0.6)
    _, faces = detector.detect(crop)
    assert faces is not None, f"no face in {box}"
    fx, fy, fw, fh = faces[int(np.argmax(faces[:, 14])), :4]
    cx = x1 + fx + fw / 2
    top, bottom = y1 + fy - 0.6 * fh, y1 + fy + 3.0 * fh
    left, right = cx - 1.5 * fw, cx + 1.5 * fw
    height, width = image.shape[:2]
    rows = slice(max(0, round(top)), min(height, round(bottom)))
    return image[rows, max(0, round(left)) : min(width, round(right))].copy()


def cut_out(
    wanted: dict[int, dict[int, tuple[int, int, int, int]]],
) -> dict[tuple[int, int], np.ndarray]:
    """(id of the person's table, seq) -> the portrait of that person in people.mp4."""
    seqs = {seq for boxes in wanted.values() for seq in boxes}
    pictures = {}
    with av.open(str(PEOPLE)) as container:
        for seq, frame in enumerate(container.decode(video=0)):
            if seq in seqs:
                image = frame.to_ndarray(format="bgr24")
                for key, boxes in wanted.items():
                    if seq in boxes:
                        pictures[(key, seq)] = portrait(image, boxes[seq])
            if seq > max(seqs):
                break
    return pictures


def make_faces_footage(folder: Path, frames: int = 48) -> tuple[Path, Path, list[Walker]]:
    """The clip, the gallery folder and the walkers (with the names they must get)."""
    pictures = cut_out({0: GREY_HAIR, 1: HAT, 2: STRANGER})
    gallery = folder / "gallery"
    for name, key, seqs in (("alice", 0, (200,)), ("bob", 1, (80,))):
        (gallery / name).mkdir(parents=True, exist_ok=True)
        for seq in seqs:
            cv2.imwrite(str(gallery / name / f"{seq}.png"), pictures[(key, seq)])
    walkers = [
        Walker("alice", pictures[(0, 200)], 40, 60),
        Walker("bob", pictures[(1, 80)], 380, 60),
        Walker("unknown", pictures[(2, 120)], 680, 100),
    ]
    clip = folder / "faces.mp4"
    rng = np.random.default_rng(0)
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": "16", "g": "24"}
        for seq in range(frames):
            image = np.full((HEIGHT, WIDTH, 3), 150, np.uint8)
            image += rng.integers(0, 6, image.shape, np.uint8)
            for walker in walkers:
                x1, y1, x2, y2 = walker.box(seq)
                image[y1:y2, x1:x2] = walker.picture
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return clip, gallery, walkers
