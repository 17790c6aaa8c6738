"""``embed``: a vector per tracked object (its appearance, or with ``on``, its face), and
with a ``gallery``, the name whose pictures it is most like."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from vapipe.pipeline.assets import model_entry
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.object_results import Embedding
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.stages.crops.cutter import frame_cut
from vapipe.stages.crops.warp import cut
from vapipe.stages.objects import outputs as out
from vapipe.stages.objects.config import EmbedConfig
from vapipe.stages.objects.detect_inside import DetectInsideStage
from vapipe.stages.objects.gallery import Gallery, GalleryWatcher, Stopped
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.stage import Job, ObjectModelStage

log = logging.getLogger(__name__)

DEFAULT_MATCH = 0.45
"""The match of a model with no measured one (MobileFaceNet-class face embeddings)."""

FACE_TEMPLATE_112 = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655],
     [70.7299, 92.2041]],
    np.float32,
)  # fmt: skip
"""Where a 112 x 112 aligned face has its eyes, nose tip and mouth corners (the template
face embedding models such as MobileFaceNet and ArcFace are trained on)."""


@register("embed")
class EmbedStage(ObjectModelStage):
    """A vector per tracked object (appearance, or with ``on``, its face), and with a
    ``gallery``, the name whose pictures it is most like."""

    Config = EmbedConfig
    config: EmbedConfig
    inside: DetectInsideStage | None = None
    gallery: Gallery | None = None
    watcher: GalleryWatcher | None = None
    stopping: threading.Event | None = None
    """The run's stop request while the node opens: a long gallery read gives up on it."""
    _seen_loads = 1

    @classmethod
    def check_for_sources(cls, config: EmbedConfig, source_ids: Sequence[str]) -> None:
        folder = Path(config.gallery) if config.gallery is not None else None
        if folder is not None and not folder.is_dir():
            what = "is a file, not a folder of name folders" if folder.is_file() else (
                "no such folder")  # fmt: skip
            raise ConfigError(f"{config.gallery}: {what}", key="gallery")

    def binds_to(self) -> str | None:
        return self.config.on

    def match(self) -> float:
        """The similarity a gallery name needs: the node's ``match``, else its model's (the
        manifest's measured value), else ``DEFAULT_MATCH``; the log says which."""
        if self.config.match is not None:
            return self.config.match
        measured = model_entry(self.config.model).get("match")
        if isinstance(measured, int | float):
            log.info("%s: match = %.2f, %s's own (models/manifest.toml)", self.name, measured,
                     self.config.model)  # fmt: skip
            return float(measured)
        log.info("%s: match = %.2f (no measured value for %s: set match for it)", self.name,
                 DEFAULT_MATCH, self.config.model)  # fmt: skip
        return DEFAULT_MATCH

    def vote_threshold(self) -> float:
        return 0.0  # every attempt votes: for a name, or for unknown

    def bind(self, shared: object | None) -> None:
        if self.config.on is None:  # on the objects themselves: the detector's, for on_classes
            super().bind(shared)
            return
        self.inside = shared if isinstance(shared, DetectInsideStage) else None
        if self.inside is not None:
            self.inside.borrow()

    def open(self, context: StageContext) -> None:
        self.stopping = context.stopping
        try:
            super().open(context)
        except Stopped:
            log.info("%s: stopped while reading the gallery", self.name)
            return
        if self.gallery is not None:
            self.watcher = GalleryWatcher(self.gallery, self.config.gallery_check_s, self.name)
            self.watcher.start()

    def close(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.stop()
        super().close()
        inside, self.inside = self.inside, None
        if inside is not None:
            inside.give_back()

    def loaded(self) -> None:
        shape, dims = self.output_dims()
        kind = self.model_kind()
        if len(dims) != 1 or not kind.startswith("an embedding"):
            raise ConfigError(
                f"model {self.model.path.name} gives {shape}, not a vector per picture: it "
                f"looks like {kind}",
                key="model",
            )
        if self.config.gallery is not None:
            self.gallery = Gallery(
                self.config.gallery, self._embed_picture, self.match(), self.config.min_size
            )
            self.gallery.load(self.stopping)

    def _embed_picture(self, picture: np.ndarray, path: str) -> np.ndarray:
        height, width = picture.shape[:2]
        box = np.array([0, 0, width, height], np.float32)
        points = None
        if self.config.on is not None:
            if self.inside is None:
                raise ConfigError(f"node '{self.config.on}' is not a detect_inside node", key="on")
            best = self.inside.best_in(picture)
            if best is None:
                raise ConfigError(
                    f"gallery picture {path}: node '{self.config.on}' finds no "
                    f"{self.inside.names[0]} in it",
                    key="gallery",
                )
            box, points = best
            side = int(min(box[2] - box[0], box[3] - box[1]))
            if side < self.config.min_size:
                raise ConfigError(
                    f"gallery picture {path}: the {self.inside.names[0]} found there is {side} "
                    f"pixels across, under min_size {self.config.min_size}",
                    key="gallery",
                )
        matrix = self._matrix(box, points)
        crop = cut(picture, matrix, self.model.size)
        return out.unit(self.model.run(crop[None]))[0]

    def _matrix(self, box: np.ndarray, points: np.ndarray | None) -> np.ndarray:
        size = self.model.size
        if points is not None and size == (112, 112):
            # A similarity transform that puts the landmarks on the template's.
            landmarks = np.ascontiguousarray(points, np.float32)  # OpenCV: no strided views
            matrix, _ = cv2.estimateAffinePartial2D(landmarks, FACE_TEMPLATE_112, method=cv2.LMEDS)
            if matrix is not None:
                return matrix
        return self.matrix_for_box(box)

    def matrix_for(self, frame: Frame, index: int, box: np.ndarray) -> np.ndarray:
        """With ``on``, the face is found again around where the face node's result puts it
        (that result follows the person's box since it was found, a few pixels off by now):
        the embedding is aligned on landmarks of this very frame."""
        if self.inside is not None:
            fresh = self._found_again(frame, box)
            if fresh is not None:
                return self._matrix(*fresh)
        return self._matrix(box, None)

    def _found_again(
        self, frame: Frame, box: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        assert self.inside is not None
        x1, y1, x2, y2 = (float(v) for v in box)
        reach_x, reach_y = 0.5 * (x2 - x1), 0.5 * (y2 - y1)
        height, width = frame.shape[:2]
        left, top = max(0, int(x1 - reach_x)), max(0, int(y1 - reach_y))
        right, bottom = min(width, int(x2 + reach_x) + 1), min(height, int(y2 + reach_y) + 1)
        if right - left < 2 or bottom - top < 2:
            return None
        region = np.array([[1.0, 0.0, -left], [0.0, 1.0, -top]])
        found = self.inside.best_in(frame_cut(frame, region, (right - left, bottom - top)))
        if found is None:
            return None
        face, points = found
        shift = np.array([left, top], np.float32)
        return face + np.tile(shift, 2), None if points is None else points + shift

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        gallery = self.gallery
        if gallery is not None and gallery.loads != self._seen_loads:  # the watcher read a change
            self._seen_loads = gallery.loads
            self.memory.renew()  # every object is matched again against the new names
        return super().process_batch(items)

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        vectors = out.unit(outputs)
        if self.gallery is None:
            return [Vote("vector", 1.0, vector) for vector in vectors]
        return [
            Vote(match.name, max(match.similarity, 0.0), vector)
            for match, vector in zip(self.gallery.match(vectors), vectors, strict=True)
        ]

    def attribute(self, result: Result, box: np.ndarray) -> Embedding:
        named = self.gallery is not None
        return Embedding(
            vector=result.payload,
            name=str(result.label) if named else None,
            similarity=result.score if named else None,
            written=self.config.vector,
        )
