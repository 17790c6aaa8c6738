"""What a node on tracked objects counts (``--stats``, ``/metrics``), the cap on its crops per
second, and what the run's summary says of a node that never did its work."""

from __future__ import annotations

import time
from collections import Counter

from vapipe.stages.objects.config import ObjectModelConfig

COUNTERS = (
    "crops", "model_calls", "too_small", "at_edge", "other_class", "deferred", "failed",
    "results",
)  # fmt: skip
"""What ``--stats`` and ``/metrics`` count per node: crops sent to the model, calls made,
objects skipped (too small, at the frame's edge, not of ``on_classes``: once per frame each),
deferred by ``max_crops_per_s``, crops that failed, results that came to hold."""


class RateCap:
    """At most ``per_s`` crops a second (wall time), in bursts of up to one second's worth."""

    def __init__(self, per_s: float) -> None:
        self.per_s = per_s
        self._tokens = max(per_s, 1.0)
        self._at = time.monotonic()

    def take(self) -> bool:
        if self.per_s <= 0:
            return True
        now = time.monotonic()
        self._tokens = min(max(self.per_s, 1.0), self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


SKIPPED_BECAUSE = {
    "too_small": "objects under min_size ({min_size} px)",
    "at_edge": "objects touching the frame's edge (skip_at_edge)",
    "other_class": "objects not of on_classes {on_classes}",
    "deferred": "objects held back by max_crops_per_s ({max_crops_per_s})",
    "failed": "crops that failed",
}


def idle_notes(counts: Counter[str], cfg: ObjectModelConfig) -> dict[str, str]:
    """What the run summary says of a node that never did its work: no crop in the whole run
    (and the reason it counted most), or crops but no result that held."""
    if not counts["crops"]:
        reasons = {key: counts[key] for key in SKIPPED_BECAUSE if counts[key]}
        if not reasons:
            return {"no_crops": "made no crop in the run: no tracked object reached it"}
        most = max(reasons, key=lambda key: reasons[key])
        why = SKIPPED_BECAUSE[most].format(**cfg.model_dump())
        return {"no_crops": f"made no crop in the run: {why}, {reasons[most]} times"}
    if not counts["results"]:
        threshold = "the model's" if cfg.threshold is None else cfg.threshold
        return {
            "no_results": f"no result held in {counts['crops']} crops: the attempts did not "
            f"agree (min_attempts {cfg.min_attempts}, agree {cfg.agree}, threshold {threshold})"
        }
    return {}
