"""Confidence filter, non-maximum suppression and mapping boxes back to frame pixels."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import cv2
import numpy as np
from pydantic import Field

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.geometry import Letterbox
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, ParallelConfig, StageConfig
from vapipe.stages.boxes import box_iou

log = logging.getLogger(__name__)

FILTER_CHECK_FRAMES = 50
"""A class filter that keeps nothing of what the model finds in a source's first this-many
frames is warned about, once per source: its ids are likely wrong for the footage (vehicle
ids on a camera of people) or for the model (another model's numbering)."""
FILTER_CHECK_MIN = 5
"""...when the model found confident objects in at least this many of them (an empty street
keeps nothing and is no sign of a wrong filter)."""


class ClassFilterCheck:
    """Counts, over each source's first frames, what the model found confidently and what the
    class filter kept; warns once when it kept nothing of a clip where the model saw things."""

    def __init__(self, node: str, classes: list[int]) -> None:
        self.node, self.classes = node, classes
        self.done: set[str] = set()
        self.empty: list[str] = []
        """Sources whose first frames the filter emptied (the stats' ``class_filter_empty``)."""
        self._frames: Counter[str] = Counter()
        self._kept: Counter[str] = Counter()
        self._busy: Counter[str] = Counter()  # frames with a confident object
        self._seen: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()  # nms may run on several threads

    def add(self, source_id: str, found: Detections, conf: float, kept: int) -> None:
        confident = found.class_id[np.isfinite(found.score) & (found.score >= conf)]
        with self._lock:
            if source_id in self.done:
                return
            seen = self._seen.setdefault(source_id, Counter())  # class -> frames with one
            seen.update({found.class_name(int(c)) for c in np.unique(confident)})
            self._busy[source_id] += bool(confident.size)
            self._kept[source_id] += kept
            self._frames[source_id] += 1
            if self._frames[source_id] < FILTER_CHECK_FRAMES:
                return
            self.done.add(source_id)
            if self._kept[source_id] or self._busy[source_id] < FILTER_CHECK_MIN:
                return
            self.empty.append(source_id)
            found_text = ", ".join(f"{name} (in {count})" for name, count in seen.most_common(3))
            log.warning(
                "%s: classes = %s kept nothing of source '%s' in its first %d frames, where "
                "the model saw %s: are these the class ids for this footage and model?",
                self.node, self.classes, source_id, FILTER_CHECK_FRAMES, found_text,
            )  # fmt: skip


class NmsConfig(ParallelConfig):
    """Score threshold, IoU threshold and limits of the ``nms`` node."""

    conf: float = Field(0.25, ge=0, le=1)
    """Minimum score kept."""
    iou: float = Field(0.45, ge=0, le=1)
    """Boxes overlapping a better one by more than this are suppressed."""
    max_det: int = Field(300, ge=1)
    """At most this many detections per frame, best first."""
    max_candidates: int = Field(30000, ge=1)
    """At most this many boxes enter NMS (the best by score), bounding its cost."""
    class_agnostic: bool = False
    """Suppress across classes (default: only boxes of the same class suppress each other)."""
    classes: list[int] | None = None
    """Keep only these class ids."""


def nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    iou: float,
    class_ids: np.ndarray | None = None,
    max_det: int | None = None,
) -> np.ndarray:
    """Greedy NMS; returns kept indices, best score first (equal scores in input order). With
    ``class_ids`` only boxes of the same class suppress each other. A box is suppressed by a
    better one whose IoU with it is above ``iou`` (equal is kept). OpenCV's batched NMS does
    the work (15x faster at 500 boxes, 5x at 3,000: bench/results/nms.md) wherever it keeps
    the same boxes as the numpy loop (tested on the sample clips, both families): every box
    with a positive score and size. Otherwise, the numpy loop."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    width, height = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    # OpenCV keeps only scores above its threshold (which must be >= 0), and measures
    # boxes by width and height: an empty or inverted box is not one it can compare.
    if (scores > 0).all() and (width > 0).all() and (height > 0).all():
        keep = nms_opencv(boxes, scores, iou, class_ids)
    else:
        keep = nms_numpy(boxes, scores, iou, class_ids)
    return keep[:max_det] if max_det is not None else keep


def nms_opencv(
    boxes: np.ndarray, scores: np.ndarray, iou: float, class_ids: np.ndarray | None = None
) -> np.ndarray:
    # OpenCV's stubs name sequences; its binding takes arrays as they are (no list per box).
    xywh: Any = np.empty((len(boxes), 4), np.float64)
    xywh[:, :2] = boxes[:, :2]
    xywh[:, 2:] = boxes[:, 2:] - boxes[:, :2]
    confidence: Any = scores.astype(np.float32, copy=False)
    if class_ids is None:
        kept = cv2.dnn.NMSBoxes(xywh, confidence, 0.0, float(iou))
    else:
        classes: Any = class_ids.astype(np.int32)
        kept = cv2.dnn.NMSBoxesBatched(xywh, confidence, classes, 0.0, float(iou))
    return np.asarray(kept, np.int64).reshape(-1)


def nms_numpy(
    boxes: np.ndarray, scores: np.ndarray, iou: float, class_ids: np.ndarray | None = None
) -> np.ndarray:
    """The same greedy NMS as a numpy loop (boxes are shifted apart per class, as
    torchvision's batched_nms does)."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    work = boxes.astype(np.float64)
    if class_ids is not None:
        span = float(work.max() - work.min()) + 1.0
        work = work + (class_ids.astype(np.float64) * span)[:, None]
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best = order[0]
        keep.append(int(best))
        if order.size == 1:
            break
        rest = order[1:]
        order = rest[box_iou(work[best], work[rest]) <= iou]
    return np.asarray(keep, np.int64)


@runtime_checkable
class TakesSuppression(Protocol):
    """What this node binds to: a model that may select boxes on its own device."""

    suppression: Selection | None


@dataclass(frozen=True)
class Selection:
    """An nms node's settings, handed to the model it is bound to: a model that decodes its
    head on its device selects there as this node would."""

    node: str
    conf: float
    iou: float
    max_det: int
    max_candidates: int
    class_agnostic: bool
    classes: tuple[int, ...] | None

    @classmethod
    def of(cls, node: str, config: NmsConfig) -> Selection:
        return cls(
            node,
            config.conf,
            config.iou,
            config.max_det,
            config.max_candidates,
            config.class_agnostic,
            tuple(config.classes) if config.classes is not None else None,
        )


@register("nms")
class NmsStage(BatchStage):
    """Keeps the confident boxes, suppresses overlaps (per class) and maps boxes to frame
    pixels."""

    reads_pixels = False
    # The frames waiting, taken together (never a wait for more): one hand-over per batch of
    # the model's, not one per frame.
    max_batch = 64
    batch_timeout_s = 0.0

    Config = NmsConfig
    config: NmsConfig
    binds = "upstream"

    def bind(self, shared: object | None) -> None:
        """Hands this node's settings to the model before it (when it is one that decodes on
        its device: it then selects there as this node would)."""
        if isinstance(shared, TakesSuppression):
            shared.suppression = Selection.of(self.name, self.config)

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.max_batch = max(1, NmsStage.max_batch // self.config.workers)  # each worker a share
        classes = self.config.classes
        self._filter_check = ClassFilterCheck(name, classes) if classes is not None else None

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        for frame in frames:
            self.select_frame(frame)
        return frames

    def select_frame(self, frame: Frame) -> None:
        """The frame's candidates replaced by its kept detections, in frame pixels."""
        if frame.detections is None:
            if frame.predicted:  # skipped by infer.interval: the tracker fills it in
                return
            raise PipelineError("frame has no detections: link an infer node before this nms node")
        found = frame.detections
        frame.detections = self.select(found, frame.letterbox)
        check = self._filter_check
        if check is not None and frame.source_id not in check.done:
            check.add(frame.source_id, found, self.config.conf, len(frame.detections))

    non_finite = 0

    def _count_non_finite(self, count: int) -> None:
        if not self.non_finite:
            log.warning(
                "%s: the model output NaN or infinite boxes or scores; dropping them (counted "
                "in the stats as non_finite)",
                self.name,
            )
        self.non_finite += count

    def stats(self) -> dict[str, Any]:
        check = self._filter_check
        return {
            "non_finite": self.non_finite,
            **({"class_filter_empty": check.empty} if check else {}),
        }

    def select(self, found: Detections, letterbox: Letterbox | None) -> Detections:
        """The kept detections of ``found`` (model-input pixels), best first, in frame pixels."""
        cfg = self.config
        finite = np.isfinite(found.score) & np.isfinite(found.xyxy).all(axis=1)
        if not finite.all():
            self._count_non_finite(int((~finite).sum()))
        mask = finite & (found.score >= cfg.conf)
        if cfg.classes is not None:
            mask &= np.isin(found.class_id, cfg.classes)
        index = np.flatnonzero(mask)
        if index.size > cfg.max_candidates:
            index = index[np.argsort(-found.score[index], kind="stable")[: cfg.max_candidates]]
        if found.suppressed:
            keep = np.argsort(-found.score[index], kind="stable")[: cfg.max_det]
        else:
            class_ids = None if cfg.class_agnostic else found.class_id[index]
            keep = nms(found.xyxy[index], found.score[index], cfg.iou, class_ids, cfg.max_det)
        # The kept detections made once (their arrays checked once): this runs per frame.
        kept = index[keep]
        xyxy = found.xyxy[kept]
        if letterbox is not None:
            xyxy = letterbox.to_frame(xyxy)
        return found.replace(
            xyxy=xyxy.astype(np.float32, copy=False),
            score=found.score[kept].astype(np.float32, copy=False),
            class_id=found.class_id[kept].astype(np.int32, copy=False),
            track_id=None if found.track_id is None else found.track_id[kept],
            attributes=None if found.attributes is None else found.attributes[kept],
        )
