"""What the run's summary says of a node on objects that never did its work: no crop in the
whole run, and the reason it counted most (too small, at the edge, not of its classes, held
back by the rate cap, crops that failed), or crops but no result that held; nothing of a node
that did its work. The runtime prints each note, and with shards a note holds where every
shard says it."""

from __future__ import annotations

from collections import Counter

import pytest

from vapipe.pipeline.metrics import format_table
from vapipe.shards.stats import add_stage
from vapipe.stages.objects.config import ClassifyConfig
from vapipe.stages.objects.tally import COUNTERS, idle_notes

CFG = ClassifyConfig(model="m.onnx", on_classes=["car"], min_size=20, max_crops_per_s=5.0)


def counts(**given: int) -> Counter[str]:
    return Counter({name: 0 for name in COUNTERS} | given)


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({}, "no tracked object reached it"),
        ({"too_small": 7, "at_edge": 3}, "objects under min_size (20 px), 7 times"),
        ({"too_small": 2, "at_edge": 3},
         "objects touching the frame's edge (skip_at_edge), 3 times"),
        ({"other_class": 9, "too_small": 1}, "objects not of on_classes ['car'], 9 times"),
        ({"deferred": 4}, "objects held back by max_crops_per_s (5.0), 4 times"),
        ({"failed": 2}, "crops that failed, 2 times"),
    ],
)  # fmt: skip
def test_no_crop_and_the_reason_counted_most(given: dict[str, int], why: str) -> None:
    assert idle_notes(counts(**given), CFG) == {"no_crops": f"made no crop in the run: {why}"}


def test_crops_without_a_result_and_a_node_that_did_its_work() -> None:
    assert idle_notes(counts(crops=12, too_small=40), CFG) == {
        "no_results": "no result held in 12 crops: the attempts did not agree (min_attempts 2, "
        "agree 0.6, threshold the model's)"
    }
    given = CFG.model_copy(update={"threshold": 0.3})
    assert "threshold 0.3)" in idle_notes(counts(crops=1), given)["no_results"]
    assert idle_notes(counts(crops=12, results=1, too_small=40), CFG) == {}


def test_the_summary_prints_each_note_and_shards_keep_what_all_say() -> None:
    stage = {"type": "classify", "frames": 5, "fps": 1.0, "mean_ms": 1.0, "p95_ms": 1.0,
             "notes": {"no_crops": "made no crop in the run: x"}}  # fmt: skip
    stats = {"stages": {"kind": stage, "_tap": dict(stage)}, "queues": {}, "wall_s": 1.0,
             "exit_code": 0}  # fmt: skip
    table = format_table(stats)
    assert "kind: made no crop in the run: x" in table.splitlines()
    assert "_tap:" not in table
    total: dict = {}
    add_stage(total, dict(stage))
    add_stage(total, {**stage, "notes": {"no_crops": "made no crop in the run: y"}})
    assert total["notes"] == {"no_crops": "made no crop in the run: x"}
    add_stage(total, {key: value for key, value in stage.items() if key != "notes"})
    assert "notes" not in total
