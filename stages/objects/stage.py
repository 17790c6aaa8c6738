"""The base of the nodes that run a model on tracked objects (after ``track``): which objects
of each frame are due (``memory``), their crops cut and sent to the model in one call for
the whole batch of frames, each attempt's vote recorded, and every object's held result
written into its detection's ``attributes`` on every frame.

A kind (``classify.py``, ``detect_inside.py``, ``embed.py``) says what the output means
(``votes``) and what an object carries (``attribute``)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from vapipe.pipeline.assets import Kind, model_entry
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.object_results import BoxesInside, ObjectResult
from vapipe.pipeline.stage import BatchStage, StageConfig, StageContext
from vapipe.pipeline.validation import suggest
from vapipe.stages.crops.cutter import Crop, Cropper, run_in_chunks
from vapipe.stages.crops.warp import CropRule, Window, crop_box, touches_edge, warp_matrix
from vapipe.stages.infer.heads import detect_family
from vapipe.stages.infer.model import Model
from vapipe.stages.objects.config import ObjectModelConfig
from vapipe.stages.objects.memory import ObjectMemory, Result, Rules, Vote
from vapipe.stages.objects.model import ObjectModel
from vapipe.stages.objects.tally import COUNTERS, RateCap, idle_notes

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5
"""The score an attempt needs to vote, for a model with no threshold of its own."""


@dataclass
class Job:
    """One crop on its way to the model."""

    frame: int
    """Index in the batch."""
    index: int
    """The detection's index in its frame."""
    key: tuple[str, int]
    """(source id, track id)."""
    box: np.ndarray
    """The object's box (frame pixels) the crop was cut around."""
    matrix: np.ndarray
    """Frame -> input pixels."""
    window: Window | None
    """The input pixels the crop fills (a letterbox pads the rest)."""
    pts: float


class ObjectModelStage(BatchStage):
    """Runs a model on the objects a tracker carries; see ``kinds`` for the node types."""

    Config: ClassVar[type[StageConfig]] = ObjectModelConfig
    config: ObjectModelConfig
    needs_upstream = ("track",)
    binds = "upstream"
    detector: Model | None = None
    """The model of the detector before it (bound when the graph is built): its class names
    are what ``on_classes`` may name."""
    joined_head: ClassVar[str | None] = None

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        cfg = self.config
        self.model = ObjectModel(name, cfg, head=self.head_to_join())
        self.max_batch = cfg.max_batch
        self.batch_timeout_s = cfg.batch_timeout_ms / 1000.0
        x1, y1, x2, y2 = cfg.region
        self.rule = CropRule((x1, y1, x2, y2), cfg.margin, cfg.fit)
        self.memory = ObjectMemory(
            Rules(
                cfg.attempts, cfg.retry_s, cfg.reinfer_s, cfg.grow, self.vote_threshold(),
                cfg.min_attempts, cfg.agree,
            )
        )  # fmt: skip
        self.counts: Counter[str] = Counter({name: 0 for name in COUNTERS})
        self._cap = RateCap(cfg.max_crops_per_s)
        self._lock = threading.Lock()  # the model loads once, whichever node asks first

    # -- the graph ----------------------------------------------------------------------

    @classmethod
    def assets_needed(cls, config: ObjectModelConfig) -> list[tuple[Kind, str]]:
        return [("models", config.model)] if model_entry(config.model) else []

    @classmethod
    def reads_results_of(cls, config: Any) -> tuple[str, ...]:
        return (config.on,) if config.on else ()

    def vote_threshold(self) -> float:
        """The score an attempt needs to vote: ``threshold``, else the model's own (its
        manifest entry's), else ``DEFAULT_THRESHOLD``."""
        if self.config.threshold is not None:
            return self.config.threshold
        own = model_entry(self.config.model).get("threshold")
        return float(own) if isinstance(own, int | float) else DEFAULT_THRESHOLD

    def head_to_join(self) -> str | None:
        """The head whose outputs the model file gets joined (a detect kind's face head)."""
        return None

    def loaded_model(self) -> ObjectModel:
        """The model, loaded on first call (a node bound to this one may ask before it
        opens: nodes open downstream first)."""
        with self._lock:
            if self.model.backend is None:
                self.model.load()
                self.loaded()
        return self.model

    def loaded(self) -> None:
        """Called once the model is loaded: a kind reads what it says of itself."""

    def output_dims(self) -> tuple[list[Any], list[Any]]:
        """The model's output shape, and its sizes past the batch that are not 1 (one for a
        score per class or a vector)."""
        shape = self.model.backend.info.output_shape if self.model.backend else []
        return shape, [d for d in shape[1:] if d != 1]

    def model_kind(self) -> str:
        """What the loaded model looks like, for an error that says a node got the wrong kind:
        a detector, a classifier (class scores with their names) or an embedding model."""
        shape, dims = self.output_dims()
        width, height = self.model.size
        family = detect_family(shape, self.model.metadata, width, height)
        if family is not None:
            return f"a {family.value} detector (for an infer or a detect_inside node)"
        named = "names" in self.model.metadata or self.model.entry.get("labels")
        if len(dims) == 1 and named:
            return f"a classifier of {dims[0]} named classes (for a classify node)"
        if len(dims) == 1:
            return f"an embedding model: a vector of {dims[0]} values (for an embed node)"
        return f"a model whose output is {shape}"

    _cropper: Cropper | None = None

    @property
    def cropper(self) -> Cropper:
        """The node's crops (stages/crops), on its OpenCL device or with numpy (``crops``):
        made when the node opens, or when first asked."""
        if self._cropper is None:
            self._cropper = Cropper(self.name, self.loaded_model(), self.rule, self.config.crops)
        return self._cropper

    def bind(self, shared: object | None) -> None:
        """The nearest node before it that shares something: the detector's model, or a
        node on objects between them (a face node), which knows the detector's."""
        if isinstance(shared, ObjectModelStage):
            self.detector = shared.detector
        else:
            self.detector = shared if isinstance(shared, Model) else None

    def _check_classes(self) -> None:
        """``on_classes`` names classes the detector has (checked once it has loaded): a typo
        would otherwise run with no crop at all."""
        wanted = self.config.on_classes
        if not wanted or self.detector is None:
            return
        names = self.detector.load().names
        for name in wanted:
            if name not in names:
                raise ConfigError(
                    f"'{name}' is not a class of the detector's model "
                    f"{self.detector.path.name}{suggest(name, names)}",
                    key="on_classes",
                )

    def open(self, context: StageContext) -> None:
        self._check_classes()
        self.cropper  # noqa: B018 - made now: its OpenCL device is chosen (and logged) at open

    # -- per batch ----------------------------------------------------------------------

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        """The batch's attempts, as frame-by-frame processing makes them (the same results on
        the same frames whatever the batching): the crops planned on a copy of the memory and
        run in one model call, then the frames taken in order, each attempt recorded before
        the next frame is looked at, and each frame given the results that hold after its own
        attempts (never one that a later frame's attempt made)."""
        objects = [self._objects(frame) for frame in items]
        votes = self._planned(items, objects)
        for position, (frame, found) in enumerate(zip(items, objects, strict=True)):
            if frame.detections is not None:
                self.memory.sweep(frame.source_id, frame.pts)
                if not frame.predicted:  # the boxes are the tracker's guesses: no attempt
                    self._attempts(frame, position, found, votes)
            self._apply(frame, found)
        return items

    def _planned(
        self, items: list[Frame], objects: list[dict[int, tuple[tuple[str, int], np.ndarray]]]
    ) -> dict[tuple[int, tuple[str, int]], Vote | None]:
        """(frame position, object) -> the vote of its crop on that frame (None: the crop
        failed), for the attempts a copy of the memory says the batch will make (every
        attempt made as if none settled its object: the real ones are among them)."""
        shadow = self.memory.shadow()
        pending: list[tuple[Frame, Job]] = []
        for position, (frame, found) in enumerate(zip(items, objects, strict=True)):
            if frame.detections is None:
                continue
            shadow.sweep(frame.source_id, frame.pts)
            if frame.predicted:
                continue
            for index, (key, box) in found.items():
                if self._due(shadow, frame, key, box) and self._cap.take():
                    pending.append((frame, self._job(frame, position, index, key, box)))
                    shadow.reserve(key, frame.pts, _area(box))
        return self._votes(pending)

    def _votes(
        self, pending: list[tuple[Frame, Job]]
    ) -> dict[tuple[int, tuple[str, int]], Vote | None]:
        """The crops cut and run through the model in one call (in chunks of its batch)."""
        planned: dict[tuple[int, tuple[str, int]], Vote | None] = {
            (job.frame, job.key): None for _, job in pending
        }
        jobs, batch = self._inputs(pending)
        if jobs:
            most = self.config.max_batch  # the batch sizes the backend prepared for
            outputs = run_in_chunks(self.model.run_input, batch, most)
            self.counts["crops"] += len(jobs)
            self.counts["model_calls"] += -(-len(jobs) // most)
            for job, vote in zip(jobs, self.votes(outputs, jobs), strict=True):
                planned[(job.frame, job.key)] = vote
        return planned

    def _attempts(
        self,
        frame: Frame,
        position: int,
        found: dict[int, tuple[tuple[str, int], np.ndarray]],
        votes: dict[tuple[int, tuple[str, int]], Vote | None],
    ) -> None:
        """The frame's attempts on the memory itself, each vote recorded at once; a due object
        that the plan did not foresee is cropped and run now."""
        due = [(index, key, box) for index, (key, box) in found.items() if self._due(
            self.memory, frame, key, box, count=True)]  # fmt: skip
        unplanned = [(i, k, b) for i, k, b in due if (position, k) not in votes]
        if unplanned:
            late = [
                (frame, self._job(frame, position, i, k, b))
                for i, k, b in unplanned
                if self._cap.take() or self._defer()
            ]
            votes.update(self._votes(late))
        for _, key, box in due:
            if (position, key) not in votes:
                continue  # held back by the rate cap
            self.memory.reserve(key, frame.pts, _area(box))
            vote = votes[(position, key)]
            if vote is not None and self.memory.record(key, vote) is not None:
                self.counts["results"] += 1

    def _defer(self) -> bool:
        self.counts["deferred"] += 1
        return False

    def _inputs(self, pending: list[tuple[Frame, Job]]) -> tuple[list[Job], np.ndarray]:
        """The jobs whose crops were cut, and the model's input for them."""
        failed = self.cropper.failed
        crops = [Crop(frame, job.matrix, job.window) for frame, job in pending]
        kept, batch = self.cropper.inputs(crops)
        self.counts["failed"] += self.cropper.failed - failed
        return [pending[index][1] for index in kept], batch

    def _objects(self, frame: Frame) -> dict[int, tuple[tuple[str, int], np.ndarray]]:
        """Detection index -> (object key, box to crop) of the frame's objects this node
        runs on: tracked ones of ``on_classes``, or with ``on``, their best box of that
        node."""
        dets = frame.detections
        if dets is None or dets.track_id is None or not len(dets):
            return {}
        wanted = self.config.on_classes
        on = self.config.on
        found = {}
        for index, track_id in enumerate(dets.track_id.tolist()):
            if track_id < 0:
                continue
            if wanted is not None and dets.class_name(int(dets.class_id[index])) not in wanted:
                self.counts["other_class"] += 1
                continue
            box: Any = dets.xyxy[index]
            if on is not None:
                held = dets.attributes[index] if dets.attributes is not None else None
                inside = held.get(on) if held else None
                best = inside.best if isinstance(inside, BoxesInside) else None
                if best is None:
                    continue
                box = np.asarray(best.xyxy, np.float32)
            found[index] = ((frame.source_id, track_id), box)
        return found

    def _due(
        self,
        memory: ObjectMemory,
        frame: Frame,
        key: tuple[str, int],
        box: np.ndarray,
        count: bool = False,
    ) -> bool:
        """Whether ``memory`` tries the object on this frame: due by its rules, large enough,
        away from the frame's edge (those two counted where ``count``)."""
        if not memory.due(key, frame.pts, _area(box)):
            return False
        width, height = float(box[2] - box[0]), float(box[3] - box[1])
        if min(width, height) < self.config.min_size:
            self.counts["too_small"] += count
            return False
        frame_h, frame_w = frame.shape[:2]
        if self.config.skip_at_edge and touches_edge(box, frame_w, frame_h):
            self.counts["at_edge"] += count
            return False
        return True

    def _job(
        self, frame: Frame, position: int, index: int, key: tuple[str, int], box: np.ndarray
    ) -> Job:
        matrix = self.matrix_for(frame, index, box)
        window = self.cropper.window(box, matrix)
        return Job(position, index, key, box, matrix, window, frame.pts)

    def matrix_for(self, frame: Frame, index: int, box: np.ndarray) -> np.ndarray:
        """Frame -> input pixels for this object's crop (a kind may align it otherwise)."""
        return self.matrix_for_box(box)

    def matrix_for_box(self, box: np.ndarray) -> np.ndarray:
        """Frame -> input pixels for a crop of ``box`` by the node's crop rule."""
        return warp_matrix(crop_box(box, self.rule), self.model.size, self.rule.fit)

    def _apply(self, frame: Frame, found: dict[int, tuple[tuple[str, int], np.ndarray]]) -> None:
        if frame.detections is None or not found:
            return
        values = {}
        for index, (key, box) in found.items():
            result = self.memory.result(key)
            if result is not None:
                values[index] = self.attribute(result, box)
        frame.detections = frame.detections.with_attributes_of(self.name, values)

    # -- what a kind says ---------------------------------------------------------------

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        """One vote per crop, from the model's outputs (N x ...)."""
        raise NotImplementedError

    def attribute(self, result: Result, box: np.ndarray) -> ObjectResult:
        """What the object's detection carries under this node's name, for an object whose
        result holds, now at ``box``."""
        raise NotImplementedError

    # -- run ----------------------------------------------------------------------------

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":
            self.memory.forget_source(message.source_id)
        return (message,)

    def counters(self) -> dict[str, int]:
        """The counts of ``COUNTERS`` so far."""
        return dict(self.counts)

    _last_stats: dict[str, Any] = {}

    def close(self) -> None:
        if self.model.backend is not None:
            self._last_stats = self.model.close()

    def stats(self) -> dict[str, Any]:
        backend = self.model.backend
        cfg = self.config
        return {
            **(backend.stats() if backend is not None else self._last_stats),
            **self.counts,
            "objects": len(self.memory.objects),
            "most_calls_per_object": self.memory.most_calls,
            "attempts_per_round": cfg.attempts,
            **({"notes": notes} if (notes := idle_notes(self.counts, cfg)) else {}),
        }


def _area(box: np.ndarray) -> float:
    return max(float(box[2] - box[0]), 0.0) * max(float(box[3] - box[1]), 0.0)
