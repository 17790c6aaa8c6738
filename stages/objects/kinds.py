"""The three node types that run a model on tracked objects: ``classify`` (a label),
``detect_inside`` (boxes inside the object: a face in a person, a plate in a car) and
``embed`` (a vector, and with a gallery, a name)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.stages.infer.heads import Family, detect_family
from vapipe.stages.infer.names import class_names
from vapipe.stages.objects import outputs as out
from vapipe.stages.objects.config import ClassifyConfig, DetectInsideConfig, EmbedConfig
from vapipe.stages.objects.crops import cut, points_to_frame, to_frame, warp_matrix
from vapipe.stages.objects.gallery import Gallery
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.model import output_names
from vapipe.stages.objects.stage import Job, ObjectModelStage, frame_cut

log = logging.getLogger(__name__)

MODELS_FOLDER = Path(__file__).resolve().parent.parent.parent / "models"

FACE_TEMPLATE_112 = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366], [41.5493, 92.3655],
     [70.7299, 92.2041]],
    np.float32,
)  # fmt: skip
"""Where a 112 x 112 aligned face has its eyes, nose tip and mouth corners (the template
face embedding models such as MobileFaceNet and ArcFace are trained on)."""


def _check_file(path: str | None, key: str) -> None:
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{path}: no such file", key=key)


def _output_dims(stage: ObjectModelStage) -> tuple[list[Any], list[Any]]:
    """The model's output shape, and its sizes past the batch that are not 1 (one for a
    score per class or a vector)."""
    shape = stage.model.backend.info.output_shape if stage.model.backend else []
    return shape, [d for d in shape[1:] if d != 1]


def _placing(box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(origin, span) of a box, for xyxy in fractions of it: frame = fraction * span + origin."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return np.array([x1, y1] * 2, np.float32), np.array([x2 - x1, y2 - y1] * 2, np.float32)


@register("classify")
class ClassifyStage(ObjectModelStage):
    """A classifier on each tracked object (of ``on_classes``): its label and score, once the
    attempts agree."""

    Config = ClassifyConfig
    config: ClassifyConfig

    @classmethod
    def check_for_sources(cls, config: ClassifyConfig, source_ids: Sequence[str]) -> None:
        _check_file(config.labels_file, "labels_file")

    def loaded(self) -> None:
        shape, classes = _output_dims(self)
        if len(classes) != 1:
            raise ConfigError(
                f"model {self.model.path.name} gives {shape}, not a score per class "
                "(N x classes): is it a classifier?",
                key="model",
            )
        self.labels = self._labels(classes[0])

    def _labels(self, count: Any) -> tuple[str, ...]:
        cfg = self.config
        if cfg.labels_file:
            labels = class_names({}, cfg.labels_file)
        elif "names" in self.model.metadata:
            labels = class_names(self.model.metadata, None)
        elif self.model.entry.get("labels"):  # a manifest model's labels, shipped with vapipe
            labels = class_names({}, str(MODELS_FOLDER / self.model.entry["labels"]))
        else:
            labels = tuple(f"class_{k}" for k in range(count if isinstance(count, int) else 0))
        if isinstance(count, int) and len(labels) != count:
            where = cfg.labels_file or "the model's names metadata"
            raise ConfigError(
                f"{where} has {len(labels)} labels, model {self.model.path.name} scores {count}",
                key="labels_file" if cfg.labels_file else "model",
            )
        return labels

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        probabilities = out.scores(outputs, self.config.activation)
        best = probabilities.argmax(axis=1)
        return [
            Vote(self._label(int(k)), float(row[k]))
            for row, k in zip(probabilities, best, strict=True)
        ]

    def _label(self, k: int) -> str:
        return self.labels[k] if k < len(self.labels) else f"class_{k}"

    def attribute(self, result: Result, box: np.ndarray) -> dict[str, Any]:
        return {"label": result.label, "score": round(result.score, 4)}


@register("detect_inside")
class DetectInsideStage(ObjectModelStage):
    """A detector run inside each tracked object: its boxes, in frame pixels, follow the
    object (mapped from where they were found to where the object is now)."""

    Config = DetectInsideConfig
    config: DetectInsideConfig

    @classmethod
    def check_for_sources(cls, config: DetectInsideConfig, source_ids: Sequence[str]) -> None:
        _check_file(config.names_file, "names_file")

    def head_to_join(self) -> str | None:
        return self.config.head if self.config.head in out.FACE_HEADS else "auto"

    def shares(self) -> DetectInsideStage:
        return self

    _users = 0
    _closed = False

    def borrow(self) -> None:
        """A node bound to this one (``on``) uses its model, also after this node has seen
        its last frame: the model stays open until the last user is done."""
        with self._lock:
            self._users += 1

    def give_back(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._closed and self._users == 0
        if last:
            super().close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            last = self._users == 0
        if last:
            super().close()

    def loaded(self) -> None:
        model, cfg = self.model, self.config
        width, height = model.size
        head = model.joined or cfg.head
        self.family: Family | None = None
        if head == "auto" or head not in out.FACE_HEADS:
            family = None if cfg.head == "auto" else Family(cfg.head)
            shape = model.backend.info.output_shape if model.backend else []
            family = family or detect_family(shape, model.metadata, width, height)
            if family is None:
                raise ConfigError(
                    f"model {model.path.name}: outputs {output_names(str(model.path))} "
                    f"{shape} fit no head this node decodes (YuNet, UltraFace, YOLO): set head",
                    key="head",
                )
            self.family, head = family, family.value
        self.head = head
        self.names = (
            (cfg.label or "face",) if head in out.FACE_HEADS
            else (cfg.label,) if cfg.label
            else class_names(model.metadata, cfg.names_file)
        )  # fmt: skip

    def found(self, rows: np.ndarray) -> out.Found:
        """The best boxes of one crop's output, input pixels."""
        width, height = self.model.size
        if self.head == "yunet":
            found = out.decode_yunet(rows, width, height)
        elif self.head == "ultraface":
            found = out.decode_ultraface(rows, width, height)
        else:
            assert self.family is not None
            found = out.decode_yolo(rows, self.family, width, height)
        return out.select(found, self.config.conf, self.config.iou, self.config.max_boxes)

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        votes = []
        for rows, job in zip(outputs, jobs, strict=True):
            found = self.found(rows)
            if not len(found.score):
                votes.append(Vote(None, 0.0))
                continue
            origin, span = _placing(job.box)
            boxes = (to_frame(found.xyxy, job.matrix) - origin) / span
            points = None
            if found.landmarks is not None:
                placed = points_to_frame(found.landmarks, job.matrix)
                points = (placed - origin[:2]) / span[:2]
            label = self._name(int(found.class_id[0]))
            payload = (boxes, found.score, found.class_id, points)
            votes.append(Vote(label, float(found.score[0]), payload))
        return votes

    def _name(self, class_id: int) -> str:
        return self.names[class_id] if class_id < len(self.names) else str(class_id)

    def attribute(self, result: Result, box: np.ndarray) -> dict[str, Any]:
        boxes, scores, classes, points = result.payload
        origin, span = _placing(box)
        placed = boxes * span + origin
        found = []
        for k, xyxy in enumerate(placed):
            entry: dict[str, Any] = {
                "xyxy": [round(float(v), 2) for v in xyxy],
                "score": round(float(scores[k]), 4),
                "label": self._name(int(classes[k])),
            }
            if points is not None:
                at = points[k] * span[:2] + origin[:2]
                entry["landmarks"] = [[round(float(x), 1), round(float(y), 1)] for x, y in at]
            found.append(entry)
        return {"boxes": found}

    def best_in(self, picture: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The best box (and landmarks) this node's model finds in a whole picture, frame
        pixels; None when it finds none (a gallery picture without a face)."""
        model = self.loaded_model()
        height, width = picture.shape[:2]
        matrix = warp_matrix(np.array([0, 0, width, height], np.float64), model.size, "letterbox")
        rows = model.run(cut(picture, matrix, model.size)[None])[0]
        found = self.found(rows)
        if not len(found.score):
            return None
        box = to_frame(found.xyxy[:1], matrix)[0]
        points = None
        if found.landmarks is not None:
            points = points_to_frame(found.landmarks[0], matrix)
        return box, points


@register("embed")
class EmbedStage(ObjectModelStage):
    """A vector per tracked object (appearance, or with ``on``, its face), and with a
    ``gallery``, the name whose pictures it is most like."""

    Config = EmbedConfig
    config: EmbedConfig
    binds = None
    inside: DetectInsideStage | None = None
    gallery: Gallery | None = None

    @classmethod
    def check_for_sources(cls, config: EmbedConfig, source_ids: Sequence[str]) -> None:
        if config.gallery is not None and not Path(config.gallery).is_dir():
            raise ConfigError(f"{config.gallery}: no such folder", key="gallery")

    def binds_to(self) -> str | None:
        return self.config.on

    def vote_threshold(self) -> float:
        return 0.0  # every attempt votes: for a name, or for unknown

    def bind(self, shared: object | None) -> None:
        self.inside = shared if isinstance(shared, DetectInsideStage) else None
        if self.inside is not None:
            self.inside.borrow()

    def close(self) -> None:
        super().close()
        inside, self.inside = self.inside, None
        if inside is not None:
            inside.give_back()

    def loaded(self) -> None:
        shape, dims = _output_dims(self)
        if len(dims) != 1:
            raise ConfigError(
                f"model {self.model.path.name} gives {shape}, not a vector per picture "
                "(N x dims): is it an embedding model?",
                key="model",
            )
        if self.config.gallery is not None:
            self.gallery = Gallery(self.config.gallery, self._embed_picture, self.config.match)
            self.gallery.load()
            self._checked = time.monotonic()

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
        if gallery is not None and time.monotonic() - self._checked >= self.config.gallery_check_s:
            self._checked = time.monotonic()
            if gallery.changed() and gallery.reload():
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

    def attribute(self, result: Result, box: np.ndarray) -> dict[str, Any]:
        value: dict[str, Any] = {}
        if self.gallery is not None:
            value = {"name": result.label, "similarity": round(result.score, 4)}
        if self.config.vector or self.gallery is None:
            value["dims"] = int(result.payload.shape[0])
        if self.config.vector:
            value["vector"] = [round(float(v), 5) for v in result.payload]
        return value
