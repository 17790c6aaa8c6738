"""``plates``: licence plates read on tracked vehicles (or on the whole frame of a camera that
sees only plates), voted per track, matched against known plates; the plate in the object's
attributes on every frame and a ``plate`` event when it first holds."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from vapipe.pipeline.frame import Frame
from vapipe.pipeline.object_results import Plate
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageConfig
from vapipe.stages.crops.cutter import Crop, run_in_chunks
from vapipe.stages.crops.warp import crop_box, cut, warp_matrix
from vapipe.stages.objects.config import check_file
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.stage import Job, ObjectModelStage
from vapipe.stages.plates import ocr
from vapipe.stages.plates.config import PlatesConfig
from vapipe.stages.plates.known import KnownPlates, checked_names, read_known
from vapipe.stages.plates.memory import PlateMemory
from vapipe.stages.plates.reader import Found, Recogniser, best_reads, regions
from vapipe.stages.plates.sightings import Sighting, Sightings

log = logging.getLogger(__name__)


def known_plates(config: PlatesConfig) -> KnownPlates:
    shape = config.shape()
    names = read_known(config.known, shape) if config.known else {}
    for plate, name in checked_names(config.known_plates, shape, "known_plates").items():
        names.setdefault(plate, name)
    return KnownPlates(names, config.tolerance)


@register("plates")
class PlatesStage(ObjectModelStage):
    """Licence plates on tracked vehicles (``on_frame``: on the whole frame)."""

    Config = PlatesConfig
    config: PlatesConfig

    def __init__(self, name: str, config: StageConfig) -> None:
        assert isinstance(config, PlatesConfig)
        paths = config.models()
        det, self.rec_path = paths["model"], paths["rec_model"]
        super().__init__(name, config.model_copy(update={"model": det}))
        cfg = self.config
        self.memory = PlateMemory(self.memory.rules)
        self.shape = cfg.shape()
        self.known = known_plates(cfg)
        self.rules = ocr.DbRules(cfg.text_thresh, cfg.box_thresh, cfg.unclip)
        self.recogniser: Recogniser | None = None
        self.announced: dict[tuple[str, int], str] = {}
        self.sightings: dict[str, Sightings] = {}
        self._next_read: dict[str, float] = {}
        self._batch: list[Frame] = []
        self.counts.update(plates=0, reads=0, known=0)

    @classmethod
    def upstream_needed(cls, config: Any) -> tuple[str, ...]:
        return () if getattr(config, "on_frame", False) else cls.needs_upstream

    @classmethod
    def check_for_sources(cls, config: PlatesConfig, source_ids: Sequence[str]) -> None:
        check_file(config.known, "known")
        check_file(config.characters, "characters")
        known_plates(config)

    def loaded(self) -> None:
        self.recogniser = Recogniser(self.name, self.config, self.rec_path)

    # -- on tracked objects -------------------------------------------------------------

    def process_batch(self, items: list[Frame]) -> list[Frame]:
        self._batch = items
        if self.config.on_frame:
            return self._frames(items)
        return super().process_batch(items)

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        sides: list[tuple[float, float] | None] = []
        for job in jobs:
            x1, _, x2, _ = crop_box(job.box, self.rule)
            sides.append((float(x1), float(x2)))
        found = self._read(
            [self._batch[job.frame].image for job in jobs],
            [regions(prob, job.matrix, self.rules)
             for prob, job in zip(outputs, jobs, strict=True)],
            sides,
        )  # fmt: skip
        votes = []
        for job, plate in zip(jobs, found, strict=True):
            if plate is None:
                votes.append(Vote(None, 0.0))
                continue
            origin = job.box[:2].astype(np.float32)
            span = np.maximum(job.box[2:4] - job.box[:2], 1e-6).astype(np.float32)
            placed = (plate.corners - origin) / span  # fractions of the vehicle's box
            votes.append(Vote(plate.read.text, plate.read.score, _Payload(plate, placed)))
        return votes

    def _read(
        self,
        images: list[np.ndarray],
        found: list[list[ocr.TextBox]],
        sides: list[tuple[float, float] | None] | None = None,
    ) -> list[Found | None]:
        assert self.recogniser is not None
        self.counts["reads"] += sum(len(corners) for corners in found)
        return best_reads(images, found, self.recogniser, self.shape, sides)

    def attribute(self, result: Result, box: np.ndarray) -> Plate:
        placed = result.payload.placed * (box[2:4] - box[:2]) + box[:2]
        match = self.known.match(result.label)
        return Plate(
            result.label,
            result.score,
            np.concatenate([placed.min(axis=0), placed.max(axis=0)]).astype(np.float32),
            match.name if match else None,
            match.plate if match else None,
        )

    def _apply(self, frame: Frame, found: dict[int, tuple[tuple[str, int], np.ndarray]]) -> None:
        super()._apply(frame, found)
        dets = frame.detections
        if dets is None or dets.attributes is None:
            return
        for index, (key, _) in found.items():
            plate = (dets.attributes[index] or {}).get(self.name)
            if not isinstance(plate, Plate) or self.announced.get(key) == plate.text:
                continue
            self.announced[key] = plate.text
            class_name = dets.class_name(int(dets.class_id[index]))
            self._event(frame, plate, {"track_id": key[1], "class_name": class_name})

    def _event(self, frame: Frame, plate: Plate, about: dict[str, Any]) -> None:
        """The ``plate`` event: the text, its score, the known plate's name, the plate's box
        (a snapshots node crops it)."""
        self.counts["plates"] += 1
        self.counts["known"] += plate.name is not None
        frame.events.append({
            "event": "plate",
            **about,
            **plate.as_event(),
            "known": plate.name is not None,
            "box": [round(float(v), 2) for v in plate.xyxy] if plate.xyxy is not None else None,
            "source_id": frame.source_id,
            "seq": frame.seq,
        })  # fmt: skip

    def read_pictures(self, pictures: list[np.ndarray]) -> list[Found | None]:
        """The best plate read in each picture taken whole (as a vehicle's crop is): the
        node's own reading, for a benchmark against another reader on the same crops."""
        model = self.loaded_model()
        matrices = [
            warp_matrix(np.array([0, 0, p.shape[1], p.shape[0]], np.float64), model.size,
                        "letterbox")
            for p in pictures
        ]  # fmt: skip
        batch = np.stack([cut(p, m, model.size) for p, m in zip(pictures, matrices, strict=True)])
        outputs = run_in_chunks(model.run, batch, self.config.max_batch)
        found = [regions(o, m, self.rules) for o, m in zip(outputs, matrices, strict=True)]
        return self._read(pictures, found)

    # -- on the whole frame -------------------------------------------------------------

    def _frames(self, items: list[Frame]) -> list[Frame]:
        """Each source's frame read every ``every_s`` (its ``region``), the reads grouped
        into sightings; an event when a sighting's plate holds (or changes)."""
        due = [frame for frame in items if self._due_frame(frame)]
        if not due:
            return items
        model = self.loaded_model()
        crops, matrices, sides = [], [], []
        for frame in due:
            height, width = frame.shape[:2]
            whole = np.array([0, 0, width, height], np.float32)
            rect = crop_box(whole, self.rule)  # ``region`` of the frame
            matrix = warp_matrix(rect, model.size, "letterbox")
            crops.append(Crop(frame, matrix, self.cropper.window(whole, matrix)))
            matrices.append(matrix)
            sides.append((float(rect[0]), float(rect[2])))
        kept, batch = self.cropper.inputs(crops)
        outputs = run_in_chunks(model.run_input, batch, self.config.max_batch)
        self.counts["crops"] += len(kept)
        frames = [due[i] for i in kept]
        found = [
            regions(prob, matrices[i], self.rules) for prob, i in zip(outputs, kept, strict=True)
        ]
        # Every region of a frame is a plate of its own here (several cars at a gate).
        assert self.recogniser is not None
        for at, frame, corners_list in zip(kept, frames, found, strict=True):
            self.counts["reads"] += len(corners_list)
            many = len(corners_list)
            reads = best_reads([frame.image] * many, [[c] for c in corners_list],
                               self.recogniser, self.shape, [sides[at]] * many)  # fmt: skip
            for plate in reads:
                if plate is not None:
                    self._sighted(frame, plate)
        return items

    def _due_frame(self, frame: Frame) -> bool:
        due = self._next_read.get(frame.source_id)
        every = self.config.every_s
        if due is not None and 0 < due - frame.pts <= every:  # more: the stream went back
            return False
        self._next_read[frame.source_id] = frame.pts + every - 1e-9
        return True

    def _sighted(self, frame: Frame, found: Found) -> None:
        cfg = self.config
        sightings = self.sightings.setdefault(
            frame.source_id, Sightings(cfg.min_attempts, cfg.agree, cfg.gone_s)
        )
        sighting = sightings.add(found, frame.pts)
        if not sightings.holds(sighting) or sighting.voted is None:
            return
        if sighting.announced == sighting.voted.text:
            return
        sighting.announced = sighting.voted.text
        self._event(frame, self._sighting_plate(sighting), {"sighting": sighting.number})

    def _sighting_plate(self, sighting: Sighting) -> Plate:
        assert sighting.voted is not None
        text = sighting.voted.text
        best = max(sighting.reads, key=lambda f: (f.read.text == text, f.read.score))
        match = self.known.match(text)
        return Plate(text, sighting.voted.score, best.xyxy.astype(np.float32),
                     match.name if match else None, match.plate if match else None)  # fmt: skip

    # -- run ----------------------------------------------------------------------------

    def close(self) -> None:
        super().close()
        if self.recogniser is not None:
            self.recogniser.close()
            self.recogniser = None

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "known_plates": len(self.known)}


class _Payload:
    """What a track keeps of a read: the read (for the vote) and where the plate lay on the
    vehicle (fractions of its box, 4 x 2)."""

    __slots__ = ("found", "placed")

    def __init__(self, found: Found, placed: np.ndarray) -> None:
        self.found, self.placed = found, placed

    @property
    def read(self) -> Any:
        return self.found.read
