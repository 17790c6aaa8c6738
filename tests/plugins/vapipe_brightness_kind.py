from __future__ import annotations

import numpy as np

from vapipe.pipeline.object_results import Label
from vapipe.pipeline.registry import register
from vapipe.stages.objects.config import ObjectModelConfig
from vapipe.stages.objects.memory import Result, Vote
from vapipe.stages.objects.stage import Job, ObjectModelStage


class BrightnessConfig(ObjectModelConfig):
    """A model that scores each crop dark or light (two logits, in that order)."""

    light_from: float = 0.5
    """Scores from this are ``light``, under it ``dark``."""


@register("brightness")
class BrightnessStage(ObjectModelStage):
    """Says of each tracked object whether it is light or dark, once its attempts agree."""

    Config = BrightnessConfig
    config: BrightnessConfig

    def vote_threshold(self) -> float:
        return 0.0  # every attempt votes, for light or for dark

    def votes(self, outputs: np.ndarray, jobs: list[Job]) -> list[Vote]:
        logits = outputs.reshape(len(outputs), -1)
        odds = np.exp(logits - logits.max(axis=1, keepdims=True))
        light = odds[:, -1] / odds.sum(axis=1)  # softmax: the light class's probability
        return [
            Vote("light", float(p)) if p >= self.config.light_from else Vote("dark", float(1 - p))
            for p in light
        ]

    def attribute(self, result: Result, box: np.ndarray) -> Label:
        return Label(result.label, result.score)
