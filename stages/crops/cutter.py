"""A node's crops of a batch's frames made its model's input: each frame's picture as it is
held (decoded planes or BGR), every crop through its warp (``warp.py``), on an OpenCL device
in one kernel where the node has one (``opencl.py``), else crop by crop with OpenCV; the model
run on them in chunks of the batch sizes its backend prepared."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from vapipe.pipeline.frame import Frame, Picture
from vapipe.stages.crops.opencl import OpenCLCrops, open_crops
from vapipe.stages.crops.warp import (
    CropRule,
    Normalise,
    Window,
    crop_box,
    cut,
    cut_i420,
    warp_matrix,
    window_of,
)

log = logging.getLogger(__name__)


def frame_cut(
    frame: Frame, matrix: np.ndarray, size: tuple[int, int], window: Window | None = None
) -> np.ndarray:
    """A crop of the frame's picture (``warp.cut``): from its decoded I420 planes where it
    has them and its BGR image is not made yet, converting only the part the crop reads (a
    node that reads pixels would otherwise have every frame converted whole)."""
    if not frame.image_made() and frame.i420() is not None:
        yuv = frame.yuv
        if yuv is not None:
            return cut_i420(yuv, matrix, size, window)
    return cut(frame.image, matrix, size, window)


def frame_picture(frame: Frame) -> Picture:
    """The frame's picture as held: its decoded I420 planes unless its BGR image is made."""
    if not frame.image_made():
        picture = frame.i420()
        if picture is not None:
            return picture
    return frame.image


class CropModel(Protocol):
    """What cutting crops for a model needs of it (``stages.objects.model.ObjectModel``)."""

    size: tuple[int, int]
    """The input's (width, height)."""
    normalise: Normalise
    channels_last: bool

    def tensor(self, crops: np.ndarray) -> np.ndarray:
        """N x H x W x 3 uint8 crops as the model's input (the numpy path's normalising)."""
        ...


@dataclass(frozen=True)
class Crop:
    """One crop to make: of which frame, through which warp, filling which window."""

    frame: Frame
    matrix: np.ndarray
    """Frame -> input pixels."""
    window: Window | None = None
    """The input pixels the crop fills (a letterbox pads the rest); None: all of them."""


class Cropper:
    """One node's crops: placed by its crop rule, cut on its OpenCL device (``crops``:
    ``auto``, ``opencl`` or ``numpy``, as ``opencl.open_crops`` reads it) or with numpy."""

    def __init__(self, node: str, model: CropModel, rule: CropRule, wanted: str) -> None:
        self.node, self.model, self.rule = node, model, rule
        self.device: OpenCLCrops | None = open_crops(
            wanted, model.size, model.normalise, model.channels_last, node
        )
        self.failed = 0
        """Crops that could not be cut (each is left out; the others go on)."""

    def warp(self, box: np.ndarray) -> tuple[np.ndarray, Window | None]:
        """Frame -> input pixels for a crop of ``box`` by the rule, and its window."""
        rect = crop_box(box, self.rule)
        matrix = warp_matrix(rect, self.model.size, self.rule.fit)
        return matrix, self.window(box, matrix)

    def window(self, box: np.ndarray, matrix: np.ndarray) -> Window | None:
        """The input pixels a crop of ``box`` through ``matrix`` fills (letterbox fits)."""
        if self.rule.fit != "letterbox":
            return None
        return window_of(crop_box(box, self.rule), matrix, self.model.size)

    def inputs(self, crops: Sequence[Crop]) -> tuple[list[int], np.ndarray]:
        """The indices of the crops that were cut, and the model's input for them."""
        if self.device is not None and crops:
            try:
                return list(range(len(crops))), self._on_device(crops)
            except Exception as exc:  # a device error: the numpy path still works
                log.warning("%s: the OpenCL crop kernel failed (%s); cutting crops with numpy "
                            "from now on", self.node, str(exc).splitlines()[0][:200])  # fmt: skip
                self.device = None
        kept, cut_crops = [], []
        for index, crop in enumerate(crops):
            try:
                cut_crops.append(frame_cut(crop.frame, crop.matrix, self.model.size, crop.window))
            except Exception as exc:  # one bad crop never stops the others
                self.failed += 1
                log.debug("%s: crop %d failed: %s", self.node, index, exc)
                continue
            kept.append(index)
        if not cut_crops:
            return kept, np.empty(0, np.float32)
        return kept, self.model.tensor(np.stack(cut_crops))

    def _on_device(self, crops: Sequence[Crop]) -> np.ndarray:
        """Every crop by one kernel, each frame uploaded once."""
        assert self.device is not None
        pictures: list[Picture] = []
        where: dict[int, int] = {}
        placed = []
        for crop in crops:
            if id(crop.frame) not in where:
                where[id(crop.frame)] = len(pictures)
                pictures.append(frame_picture(crop.frame))
            placed.append((where[id(crop.frame)], crop.matrix, crop.window))
        return self.device.inputs(pictures, placed)


def run_in_chunks(
    run: Callable[[np.ndarray], np.ndarray], batch: np.ndarray, most: int
) -> np.ndarray:
    """``run`` over ``batch`` in chunks of at most ``most`` (the batch sizes a backend
    prepared), the outputs joined."""
    return np.concatenate([run(batch[i : i + most]) for i in range(0, len(batch), most)])
