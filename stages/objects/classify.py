"""``classify``: a classifier on each tracked object (of ``on_classes``), its label and
score once the attempts agree."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.object_results import Label
from vapipe.pipeline.registry import register
from vapipe.stages.infer.names import class_names
from vapipe.stages.objects import outputs as out
from vapipe.stages.objects.config import ClassifyConfig, check_file
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.stage import Job, ObjectModelStage

log = logging.getLogger(__name__)

MODELS_FOLDER = Path(__file__).resolve().parent.parent.parent / "models"
"""Where a manifest model's labels file ships (``labels`` in its manifest entry)."""


@register("classify")
class ClassifyStage(ObjectModelStage):
    """A classifier on each tracked object (of ``on_classes``): its label and score, once the
    attempts agree."""

    Config = ClassifyConfig
    config: ClassifyConfig

    @classmethod
    def check_for_sources(cls, config: ClassifyConfig, source_ids: Sequence[str]) -> None:
        check_file(config.labels_file, "labels_file")

    def loaded(self) -> None:
        shape, classes = self.output_dims()
        if len(classes) != 1:
            raise ConfigError(
                f"model {self.model.path.name} gives {shape}, not a score per class: it looks "
                f"like {self.model_kind()}",
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
        else:  # no names: no label can ever hold
            raise ConfigError(
                f"model {self.model.path.name} names no classes: it looks like "
                f"{self.model_kind()}; for a classifier, give its class names in labels_file",
                key="model",
            )
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

    def attribute(self, result: Result, box: np.ndarray) -> Label:
        return Label(str(result.label), result.score)
