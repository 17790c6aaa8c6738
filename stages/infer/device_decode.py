"""YOLO head decode, score filter and class-aware NMS on the torch device, for a whole batch.

The numpy path (heads.py, then the nms node) copies the raw head to the host, 2.8 MB per
frame for YOLOv8n at 640, and decodes it image by image in Python. Here the batch stays on
the device until only the kept boxes are left: a few kilobytes cross back. The result is
what the nms node would have kept, in model-input pixels, marked ``suppressed`` so that node
only maps it to frame pixels.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.infer.backends.base import padded_size
from vapipe.stages.infer.heads import Family, yolox_grid_for
from vapipe.stages.lazy_graphs import LazyGraphs

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from vapipe.stages.nms import Selection


COLUMNS = ("x1", "y1", "x2", "y2", "score", "class", "image", "group")
"""The head decode's table, one row per anchor."""
CLASS, IMAGE, GROUP = (COLUMNS.index(name) for name in ("class", "image", "group"))


class DeviceDecoder:
    """Decodes batched raw outputs on their device; one instance per infer node."""

    families = (Family.YOLOX, Family.YOLOV5, Family.YOLOV8)

    def __init__(
        self,
        family: Family,
        input_w: int,
        input_h: int,
        names: Sequence[str],
        selection: Selection,
        *,
        graph_sizes: tuple[int, ...] = (),
    ) -> None:
        import torch

        if family not in self.families:
            raise ValueError(f"no device decoder for {family.value} heads")
        self.torch = torch
        self.family, self.names, self.selection = family, names, selection
        self.input_w, self.input_h = input_w, input_h
        self._grids: dict[Any, tuple[Any, Any]] = {}
        self._classes: dict[Any, Any] = {}
        # torchvision is optional: without its kernel, the same greedy NMS in plain torch.
        self._batched_nms = torchvision_batched_nms(torch) or _batched_nms
        # The fixed-shape part (boxes, scores, the filter) replayed as one CUDA graph per
        # batch size the model's own graphs have (``graph_sizes``, on a GPU whose model is
        # graphed; none: op by op): some twenty torch calls a batch become one.
        self.graph_sizes = graph_sizes
        self.graphs = LazyGraphs(torch, None, "head decode") if graph_sizes else None

    def __call__(self, output: Any) -> list[Detections]:
        torch = self.torch
        with torch.inference_mode():
            found = None
            if self.graphs is not None:
                # Padded as the model pads (batches come in any size): rows past the batch
                # hold an earlier batch's and are cut off the outputs.
                count = output.shape[0]
                padded = max(count, padded_size(count, self.graph_sizes))
                found = self.graphs.run(
                    (padded, *output.shape[1:], output.dtype),
                    lambda static_in: static_in[:count].copy_(output),
                    lambda: output.new_zeros((padded, *output.shape[1:])),
                    self._anchors,
                )
            if found is not None:
                keep, table = (part[:count] for part in found)
            else:
                keep, table = self._anchors(output)
            return self._select(keep, table)

    def _classes_in(self, output: Any) -> int:
        """The model's class count: YOLOv8's rows are 4 box values and the classes' scores,
        YOLOX's and YOLOv5's 4 box values, an objectness and the classes' scores."""
        if self.family is Family.YOLOV8:
            return int(output.shape[1]) - 4
        return int(output.shape[-1]) - 5

    def _anchors(self, output: Any) -> tuple[Any, Any]:
        """Which anchors pass the score and class filter (B, A) and every anchor's row of one
        (B, A, 8) float32 table (:data:`COLUMNS`), in model-input pixels: the same shapes
        whatever the detections, so a CUDA graph can make them."""
        torch, sel = self.torch, self.selection
        boxes, scores = self._boxes_and_scores(output.float())
        best, class_id = scores.max(dim=-1)
        keep = (best >= sel.conf) & torch.isfinite(best) & torch.isfinite(boxes).all(dim=-1)
        if sel.classes is not None:
            keep &= torch.isin(class_id, self._wanted(class_id.device))
        if sel.max_candidates < best.shape[1]:
            ranked = torch.where(keep, best, torch.full_like(best, -1.0))
            floor = ranked.topk(sel.max_candidates, dim=1).values[:, -1:]
            keep &= ranked >= floor
        # Box, score, class, image and NMS group side by side, so the kept ones are gathered
        # in one call and read back in one (each torch call outside a graph lets go of the
        # interpreter lock and waits to win it back: issue 61's profile). Images and groups
        # are small integers, exact in float32. One NMS call for the whole batch keeps boxes
        # of different images (and, unless class agnostic, classes) apart by the group.
        image = torch.arange(best.shape[0], device=best.device).unsqueeze(1).expand_as(best)
        group = image if sel.class_agnostic else image * self._classes_in(output) + class_id
        columns = (best, class_id.float(), image.float(), group.float())
        table = torch.cat((boxes, *(column.unsqueeze(-1) for column in columns)), dim=-1)
        return keep, table

    def _boxes_and_scores(self, output: Any) -> tuple[Any, Any]:
        """(B, A, 4) xyxy boxes and (B, A, classes) scores in model-input pixels."""
        torch = self.torch
        if self.family is Family.YOLOV8:
            rows = output.transpose(1, 2)
            centre, size, scores = rows[..., :2], rows[..., 2:4], rows[..., 4:]
        else:
            if self.family is Family.YOLOX:
                grid, stride = self._grid(output.device, output.shape[1])
                centre = (output[..., :2] + grid) * stride
                size = torch.exp(output[..., 2:4]) * stride
            else:
                centre, size = output[..., :2], output[..., 2:4]
            scores = output[..., 4:5] * output[..., 5:]
        half = size / 2
        return torch.cat((centre - half, centre + half), dim=-1), scores

    def _wanted(self, device: Any) -> Any:
        """The selection's classes as a tensor on ``device``, made once (not copied to the
        device every batch)."""
        found = self._classes.get(device)
        if found is None:
            found = self._classes[device] = self.torch.tensor(self.selection.classes, device=device)
        return found

    def _grid(self, device: Any, anchors: int) -> tuple[Any, Any]:
        key = (device, anchors)
        if key not in self._grids:
            grid, stride = yolox_grid_for(anchors, self.input_w, self.input_h)
            to_device = self.torch.from_numpy
            self._grids[key] = (to_device(grid).to(device), to_device(stride).to(device))
        return self._grids[key]

    def _select(self, keep: Any, table: Any) -> list[Detections]:
        sel = self.selection
        batch = keep.shape[0]
        picked = table[keep]
        kept = self._batched_nms(picked[:, :4], picked[:, 4], picked[:, GROUP], sel.iou)
        rows = picked[kept].cpu().numpy()
        # kept is best-first; a stable sort by image keeps that order within each image.
        rows = rows[np.argsort(rows[:, IMAGE], kind="stable")]
        host = {
            "xyxy": np.ascontiguousarray(rows[:, :4]),
            "score": np.ascontiguousarray(rows[:, 4]),
            "class_id": rows[:, CLASS].astype(np.int32),
        }
        bounds = np.searchsorted(rows[:, IMAGE], np.arange(batch + 1))
        results = []
        for index in range(batch):
            start, end = bounds[index], min(bounds[index + 1], bounds[index] + sel.max_det)
            results.append(
                Detections(
                    xyxy=host["xyxy"][start:end],
                    score=host["score"][start:end],
                    class_id=host["class_id"][start:end],
                    names=self.names,
                    suppressed=True,
                )
            )
        return results


def torchvision_batched_nms(torch: Any) -> Callable[..., Any] | None:
    """torchvision's batched NMS on its own compiled kernel, loaded without importing the
    torchvision package (which imports torch._dynamo and sympy: 2.5-3.8 s of start-up on the
    GPU machine, for one function); None where torchvision is not installed."""
    import importlib.machinery
    import importlib.util

    try:
        spec = importlib.util.find_spec("torchvision")
        folders = list(spec.submodule_search_locations or []) if spec else []
        libraries = [
            path for folder in folders for suffix in importlib.machinery.EXTENSION_SUFFIXES
            for path in sorted(Path(folder).glob(f"_C*{suffix}"))
        ]  # fmt: skip
        if not libraries:
            return None
        if not hasattr(torch.ops.torchvision, "nms"):
            torch.ops.load_library(str(libraries[0]))
        nms = torch.ops.torchvision.nms
    except (ImportError, OSError, RuntimeError, AttributeError) as exc:
        log.debug("torchvision's NMS kernel not loaded: %s", exc)
        return None

    def batched_nms(boxes: Any, scores: Any, groups: Any, iou: float) -> Any:
        # What torchvision.ops.batched_nms does: few boxes, each group shifted past the
        # others' (one call); many, one call per group, since in float32 large shifts cost
        # the boxes' precision.
        if boxes.numel() == 0:
            return torch.zeros(0, dtype=torch.int64, device=boxes.device)
        if boxes.numel() <= (4000 if boxes.device.type == "cpu" else 20000):
            offsets = groups.to(boxes) * (boxes.max() + 1)
            return nms(boxes + offsets[:, None], scores, iou)
        keep = torch.zeros_like(scores, dtype=torch.bool)
        for group in torch.unique(groups):
            members = torch.where(groups == group)[0]
            keep[members[nms(boxes[members], scores[members], iou)]] = True
        kept = torch.where(keep)[0]
        return kept[scores[kept].sort(descending=True)[1]]

    return batched_nms


def _batched_nms(boxes: Any, scores: Any, groups: Any, iou: float) -> Any:
    """Greedy NMS per group, best first (torchvision's ``batched_nms`` without torchvision)."""
    import torch

    if boxes.numel() == 0:
        return torch.zeros(0, dtype=torch.int64, device=boxes.device)
    span = boxes.max() - boxes.min() + 1
    shifted = boxes + (groups.to(boxes.dtype) * span)[:, None]
    order = scores.argsort(descending=True, stable=True)
    shifted = shifted[order]
    area = (shifted[:, 2] - shifted[:, 0]) * (shifted[:, 3] - shifted[:, 1])
    top_left = torch.maximum(shifted[:, None, :2], shifted[None, :, :2])
    bottom_right = torch.minimum(shifted[:, None, 2:], shifted[None, :, 2:])
    inter = (bottom_right - top_left).clamp(min=0).prod(dim=-1)
    overlaps = (inter / (area[:, None] + area[None, :] - inter).clamp(min=1e-12) > iou).cpu()
    suppressed = np.zeros(len(order), bool)
    keep = []
    matrix = overlaps.numpy()
    for index in range(len(order)):
        if suppressed[index]:
            continue
        keep.append(index)
        suppressed |= matrix[index]
    return order[torch.tensor(keep, dtype=torch.int64, device=order.device)]
