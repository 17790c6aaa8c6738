"""The recogniser of one ``plates`` node, and what turns a detector's map of a crop into the
reads of the plates in it: regions (``ocr.text_boxes``) placed in the frame, cut out straight
from the frame's own pixels (not the detector's downscaled crop: a 20 px plate keeps its
detail), all of a batch read in one model call, the plate-shaped read of each crop kept."""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from vapipe.stages.crops.cutter import run_in_chunks
from vapipe.stages.crops.warp import points_to_frame
from vapipe.stages.infer.backends import load_backend
from vapipe.stages.infer.backends.base import Backend
from vapipe.stages.objects.model import prepare, release
from vapipe.stages.plates import ocr
from vapipe.stages.plates.config import PlatesConfig
from vapipe.stages.plates.text import PlateShape, Read, normalised

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Found:
    """One plate-shaped read in a crop: what it says, and where (frame pixels)."""

    read: Read
    corners: np.ndarray
    """4 x 2, frame pixels."""
    raw: str
    """The text as the model read it (separators kept)."""

    @property
    def xyxy(self) -> np.ndarray:
        return np.concatenate([self.corners.min(axis=0), self.corners.max(axis=0)])


class Recogniser:
    """The CTC recogniser, loaded at open: N straightened lines -> N (text, scores)."""

    def __init__(self, node: str, config: PlatesConfig, path: str) -> None:
        self.node, self.config, self.path = node, config, path
        folder = tempfile.mkdtemp(prefix="vapipe-plates-")
        self._folder: str | None = folder
        prepared = prepare(path, None, [config.rec_width, ocr.REC_HEIGHT], folder)
        self.backend: Backend | None = load_backend(
            prepared.path, node, config.backend, config.max_batch
        )
        info = self.backend.info
        classes = info.output_shape[-1]
        if not isinstance(classes, int):
            raise ValueError(f"{path}: the output's last axis has no fixed size ({classes})")
        name = os.path.basename(path)
        self.chars = ocr.characters(info.metadata.get("character"), classes, name,
                                    config.characters)  # fmt: skip
        log.info("%s: reads with %s (%d characters) on %s", node, name, len(self.chars) - 2,
                 self.backend.device)  # fmt: skip

    def read(self, lines: list[np.ndarray]) -> list[tuple[str, tuple[float, ...]]]:
        if not lines or self.backend is None:
            return []
        batch = ocr.rec_batch(lines, self.config.rec_width)
        outputs = run_in_chunks(self.backend.run, batch, self.config.max_batch)
        return [ocr.ctc_read(np.asarray(row, np.float32), self.chars) for row in outputs]

    def close(self) -> dict[str, object]:
        backend, self.backend = self.backend, None
        folder, self._folder = self._folder, None
        return release(backend, folder)


def regions(prob: np.ndarray, matrix: np.ndarray, rules: ocr.DbRules) -> list[ocr.TextBox]:
    """The text lines of one crop's map (1 x H x W or H x W, input pixels), in frame pixels
    (``matrix``: frame -> input pixels)."""
    boxes = ocr.text_boxes(np.asarray(prob, np.float32).reshape(prob.shape[-2:]), rules)
    return [line.moved(lambda points: points_to_frame(points, matrix))
            for line in ocr.joined_lines(boxes)]  # fmt: skip


def cut_off(corners: np.ndarray, width: int, height: int,
            sides: tuple[float, float] | None) -> bool:  # fmt: skip
    """Whether a text line (4 x 2, frame pixels, as grown by ``unclip``) comes within a third
    of its height of the frame's border, or of the left or right side of the crop it was found
    in (``sides``: x1, x2): the text may go on beyond it, and a plate read in part reads as a
    shorter plate. (Not the crop's top and bottom: a plate on a bumper reaches the vehicle
    box's bottom once grown.) Measured on the scenes: the grown box, not the detector's core,
    keeps every partly seen plate of the tuning scenes out."""
    (x1, y1), (x2, y2) = corners.min(axis=0), corners.max(axis=0)
    slack = max(2.0, (y2 - y1) / 3)
    if x1 < slack or x2 > width - 1 - slack or y1 < 1 or y2 > height - 2:
        return True
    return sides is not None and (x1 < sides[0] + slack or x2 > sides[1] - slack)


def best_reads(
    image_of: list[np.ndarray],
    found: list[list[ocr.TextBox]],
    recogniser: Recogniser,
    shape: PlateShape,
    sides: list[tuple[float, float] | None] | None = None,
) -> list[Found | None]:
    """For each crop (its frame's image, its regions' corners, its left and right side in the
    frame): the best plate-shaped read of its regions that no border cuts, all of them read
    in one call; None where no region reads as a plate."""
    lines, owners = [], []
    for index, (image, corners_list) in enumerate(zip(image_of, found, strict=True)):
        for line in corners_list:
            if cut_off(line.corners, image.shape[1], image.shape[0],
                       sides[index] if sides else None):  # fmt: skip
                continue
            lines.append(ocr.straightened(image, line.corners, recogniser.config.rec_width))
            owners.append((index, line.corners))
    best: list[Found | None] = [None] * len(found)
    for (index, corners), (raw, scores) in zip(owners, recogniser.read(lines), strict=True):
        # Separators dropped, case folded; each character keeps its own score.
        kept = [(n, s) for c, s in zip(raw, scores, strict=True) for n in normalised(c)]
        text = "".join(n for n, _ in kept)
        if not shape.fits(text):
            continue
        read = Read(text, tuple(s for _, s in kept))
        current = best[index]
        if current is None or read.score > current.read.score:
            best[index] = Found(read, corners, raw)
    return best
