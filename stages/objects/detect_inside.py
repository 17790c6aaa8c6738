"""``detect_inside``: a detector run inside each tracked object (a face in a person, a plate
in a car); its boxes, in frame pixels, follow the object."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.object_results import BoxesInside, FoundBox
from vapipe.pipeline.registry import register
from vapipe.stages.crops.warp import cut, points_to_frame, to_frame, warp_matrix
from vapipe.stages.infer.heads import Family, detect_family
from vapipe.stages.infer.names import class_names
from vapipe.stages.objects import outputs as out
from vapipe.stages.objects.config import DetectInsideConfig, check_file
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.model import output_names
from vapipe.stages.objects.stage import Job, ObjectModelStage

log = logging.getLogger(__name__)


def _placing(box: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(origin, span) of a box, for xyxy in fractions of it: frame = fraction * span + origin."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return np.array([x1, y1] * 2, np.float32), np.array([x2 - x1, y2 - y1] * 2, np.float32)


@register("detect_inside")
class DetectInsideStage(ObjectModelStage):
    """A detector run inside each tracked object: its boxes, in frame pixels, follow the
    object (mapped from where they were found to where the object is now)."""

    Config = DetectInsideConfig
    config: DetectInsideConfig

    @classmethod
    def check_for_sources(cls, config: DetectInsideConfig, source_ids: Sequence[str]) -> None:
        check_file(config.names_file, "names_file")

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

    def attribute(self, result: Result, box: np.ndarray) -> BoxesInside:
        """The boxes where the object is now: found in fractions of its box, placed on it."""
        boxes, scores, classes, points = result.payload
        origin, span = _placing(box)
        placed = boxes * span + origin
        return BoxesInside(
            tuple(
                FoundBox(
                    xyxy,
                    float(scores[k]),
                    self._name(int(classes[k])),
                    None if points is None else points[k] * span[:2] + origin[:2],
                )
                for k, xyxy in enumerate(placed)
            )
        )

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
