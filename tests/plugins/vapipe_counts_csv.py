from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from vapipe.pipeline.frame import Frame
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext


class CountsCsvConfig(StageConfig):
    """Where the counts go, and which classes get a column."""

    path: str = "out/counts.csv"
    """The CSV file, written anew each run."""
    classes: list[str] = ["person", "car"]
    """Class names counted, one column each."""


@register("counts_csv")
class CountsCsvSink(Stage):
    """One CSV line per frame: its source, number and time, and how many of each class."""

    Config = CountsCsvConfig
    config: CountsCsvConfig
    reads_pixels = False  # counts only: the frames' pixels can go once the model has them

    @classmethod
    def files_written(cls, config: CountsCsvConfig, source_ids: Sequence[str]) -> list[str | Names]:
        return [config.path]  # checked before anything opens: never an input, nor another output

    def open(self, context: StageContext) -> None:
        Path(self.config.path).parent.mkdir(parents=True, exist_ok=True)
        # Open for the whole run (close() closes it), written a line at a time.
        self.file = open(self.config.path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.file.write(",".join(["source_id", "seq", "pts", *self.config.classes]) + "\n")

    def process(self, frame: Frame) -> tuple[Frame]:
        dets = frame.detections
        seen = Counter(dets.class_name(c) for c in dets.class_id.tolist()) if dets else Counter()
        counts = [str(seen[name]) for name in self.config.classes]
        self.file.write(
            ",".join([frame.source_id, str(frame.seq), f"{frame.pts:.3f}", *counts]) + "\n"
        )
        return (frame,)

    def close(self) -> None:
        self.file.close()  # the runner calls it on errors and Ctrl-C too
