"""The whole graph with its frames decoded on a GPU's video decoder (a stand-in for NVIDIA's
library, tests/fakes/pynvvideocodec.py, on torch's CPU device), letterboxed where they lie by
the torch preprocess backend and detected by the torch backend: the same events as software
decoding, and an annotated video drawn from the pictures downloaded for it."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.e2e.helpers import FILE_CONFIG, read_events
from tests.fakes import pynvvideocodec
from vapipe import Pipeline
from vapipe.stages.source import nvdec

FRAMES = 40


def run(tmp_path: Path, name: str, hwaccel: str | None) -> dict[str, Any]:
    events, video = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.mp4"
    overrides: dict[str, Any] = {
        "det.backend.type": "torch", "det.backend.device": "cpu", "pre.backend": "torch",
        "det.max_batch": 4, "det.batch_timeout_ms": 60000,
        "events.path": str(events), "video.path": str(video),
    }  # fmt: skip
    if hwaccel:
        overrides["cam.hwaccel"] = hwaccel
    outcome = Pipeline.from_toml(FILE_CONFIG, overrides, max_frames=FRAMES).run()
    assert outcome.ok, outcome.error
    return {"events": read_events(events), "video": video, "stats": outcome.stats}


def test_nvdec_frames_give_the_software_paths_events_and_video(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx2torch")
    software = run(tmp_path, "software", None)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module())
    monkeypatch.setattr(nvdec, "cuda_device", lambda torch, gpu: torch.device("cpu"))
    device = run(tmp_path, "nvdec", "nvdec")
    frames = [e for e in device["events"] if e.get("type", "frame") == "frame"]
    assert len(frames) == FRAMES
    assert [(e["seq"], e["pts"], e["detections"]) for e in frames] == [
        (e["seq"], e["pts"], e["detections"])
        for e in software["events"]
        if e.get("type", "frame") == "frame"
    ]
    assert sum(len(e["detections"]) for e in frames) > FRAMES  # people were found
    assert device["stats"]["stages"]["cam"]["decoder"] == "nvdec"
    # The drawn pictures were downloaded from the device: the same pictures, encoded. x264's
    # threads may round macroblocks differently from run to run (0.60 seen once on a loaded
    # 2-core CI machine), so the bound is a third of what a neighbouring frame of this clip
    # differs by: a wrong picture (another frame, planes swapped) is far above it.
    with av.open(str(device["video"])) as one, av.open(str(software["video"])) as other:
        theirs = [frame.to_ndarray().astype(int) for frame in other.decode(video=0)]
        mine = [frame.to_ndarray().astype(int) for frame in one.decode(video=0)]
    errors = [np.abs(a - b).mean() for a, b in zip(mine, theirs, strict=True)]
    neighbours = [np.abs(a - b).mean() for a, b in itertools.pairwise(theirs)]
    assert len(errors) == FRAMES and max(errors) < np.mean(neighbours) / 3, (errors, neighbours)
