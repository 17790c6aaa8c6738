"""Frames for quantising a model, taken through the pipeline's own source and preprocessing
(so the quantised model is calibrated on exactly the tensors it will see), and how far a
quantised model agrees with the float one on frames it was not calibrated on."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from vapipe.pipeline import assets
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.stage import StageContext
from vapipe.stages.boxes import box_iou
from vapipe.stages.infer.stage import InferConfig, InferStage
from vapipe.stages.nms import NmsConfig, NmsStage
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage
from vapipe.stages.source.stage import SourceConfig, VideoSource

HELD_OUT_EVERY = 5
"""Every 5th frame taken is held out of calibration, to measure agreement on."""
MATCH_IOU = 0.5


def open_model(model: str, threads: int | None = None) -> InferStage:
    """The model as the pipeline runs it on the CPU (onnxruntime, host decode)."""
    config = InferConfig.model_validate(
        {
            "model": model,
            "backend": {"type": "onnxruntime", "providers": "cpu", "threads": threads or 0},
            "decode_on_device": False,
        }
    )
    stage = InferStage("det", config)
    stage.open(StageContext("det"))
    return stage


@dataclass
class Sample:
    calibration: list[np.ndarray]
    """Model input tensors (CHW) to calibrate on."""
    held_out: list[Frame]
    """Frames with their tensor and letterbox, never calibrated on."""
    frames: list[Frame]
    """Every frame taken, in order."""


def take_frames(uri: str, infer: InferStage, count: int, every: int = 1) -> Sample:
    """``count`` frames of ``uri`` (every ``every``-th), preprocessed for ``infer``'s model."""
    source_config = SourceConfig(uri=uri)
    assets.prepare(
        [assets.Needed(k, n, "--calibrate") for k, n in VideoSource.assets_needed(source_config)]
    )
    pre = PreprocessStage("pre", PreprocessConfig())
    pre.bind(infer.model)
    pre.open(StageContext("pre", pixels_read_after=False))
    source = VideoSource("calibrate", source_config)
    source.open(StageContext("calibrate"))
    taken: list[Frame] = []
    try:
        for index, item in enumerate(f for f in source.frames() if isinstance(f, Frame)):
            if index % every == 0:
                taken.extend(pre.process_batch([item]))
            if len(taken) >= count:
                break
    finally:
        source.close()
        pre.close()
    if len(taken) < 2:
        raise PipelineError(f"{source.display_uri}: {len(taken)} frames; calibration needs 2+")
    held_out = taken[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY] or taken[-1:]
    calibration = [
        f.tensor for f in taken if f.tensor is not None and all(f is not h for h in held_out)
    ]
    return Sample(calibration, held_out, taken)


def detect(infer: InferStage, nms: NmsStage, frames: list[Frame]) -> list[Any]:
    """Each frame's kept detections, as the pipeline's infer and nms nodes make them."""
    found = []
    for frame in frames:
        frame.detections = None
        [done] = infer.process_batch([frame])
        assert done.detections is not None  # the infer node sets them on every frame
        found.append(nms.select(done.detections, done.letterbox))
    return found


def frames_per_second(infer: InferStage, frames: list[Frame], seconds: float = 3.0) -> float:
    """Frames/s of one model call per frame over the held-out frames, repeated for at least
    ``seconds`` after one warm-up call."""
    infer.process_batch([frames[0]])
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds or done < len(frames):
        infer.process_batch([frames[done % len(frames)]])
        done += 1
    return done / (time.perf_counter() - started)


def agreement(reference: list[Any], candidate: list[Any]) -> dict[str, Any]:
    """Share of the reference's detections that the candidate has too (same class, IoU >=
    0.5, each used once, best score first), and the mean score change of those."""
    matched, changes, total = 0, [], 0
    for ours, theirs in zip(reference, candidate, strict=True):
        total += len(ours.score)
        free = np.ones(len(theirs.score), bool)
        for index in np.argsort(-ours.score):
            same = free & (theirs.class_id == ours.class_id[index])
            if not same.any():
                continue
            overlap = np.where(same, box_iou(ours.xyxy[index], theirs.xyxy), -1.0)
            best = int(np.argmax(overlap))
            if overlap[best] >= MATCH_IOU:
                matched += 1
                free[best] = False
                changes.append(float(theirs.score[best] - ours.score[index]))
    return {
        "matched": round(matched / total, 4) if total else None,
        "float_detections": total,
        "mean_score_change": round(float(np.mean(changes)), 4) if changes else None,
    }


def compare(
    model: str, quantised: str, held_out: list[Frame], measure_speed: bool = True
) -> dict[str, Any]:
    """Agreement and speed of ``quantised`` against the float ``model`` on these frames."""
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    nms = NmsStage("nms", NmsConfig())
    reference, candidate = open_model(model, threads), open_model(quantised, threads)
    try:
        result = agreement(detect(reference, nms, held_out), detect(candidate, nms, held_out))
        result["held_out_frames"] = len(held_out)
        if measure_speed:
            float_fps = frames_per_second(reference, held_out)
            quantised_fps = frames_per_second(candidate, held_out)
            result["float_fps"] = round(float_fps, 2)
            result["fps"] = round(quantised_fps, 2)
            result["speedup"] = round(quantised_fps / float_fps, 3)
            result["threads"] = threads
    finally:
        reference.close()
        candidate.close()
    return result
