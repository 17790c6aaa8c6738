"""Hiding regions of a picture still in GPU memory (NV12, as NVDEC or rocDecode left it:
``pipeline.device_picture.DeviceNV12``), with torch on the picture's own device, before any
download: the same rules as ``redaction`` (``cells`` across a region's shorter side, at least
two pixels a cell; blur = the coarse picture interpolated back; pixelate = blocks; fill = one
colour), applied to the luma plane and, at half size, to the interleaved chroma plane.

A region's corners are rounded out to even pixels: a chroma sample covers 2 x 2 pixels, and a
region that split one would leave half of it original."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from vapipe.pipeline.device_picture import DeviceNV12
from vapipe.stages.media.redaction import Method


def yuv_of(bgr: tuple[int, int, int]) -> tuple[int, int, int]:
    """A BGR colour as OpenCV's BT.601 converts it (what the host path's picture becomes)."""
    planes = cv2.cvtColor(np.full((2, 2, 3), bgr, np.uint8), cv2.COLOR_BGR2YUV_I420)
    return int(planes[0, 0]), int(planes[2, 0]), int(planes[2, 1])


def even_box(xyxy: np.ndarray, width: int, height: int) -> tuple[int, int, int, int] | None:
    """Even pixel corners covering the box, inside the frame; None when nothing of it is."""
    x0 = max(0, int(np.floor(xyxy[0] / 2)) * 2)
    y0 = max(0, int(np.floor(xyxy[1] / 2)) * 2)
    x1 = min(width, int(np.ceil(xyxy[2] / 2)) * 2)
    y1 = min(height, int(np.ceil(xyxy[3] / 2)) * 2)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def hidden_planes(patch: Any, method: Method, cells: int, value: tuple[int, ...]) -> Any:
    """``patch`` (channels x H x W uint8 tensor) hidden, the same shape."""
    import torch
    import torch.nn.functional as F

    channels, height, width = patch.shape
    if method == "fill":
        fill = torch.tensor(value, dtype=patch.dtype, device=patch.device)
        return fill.view(channels, 1, 1).expand(channels, height, width).clone()
    step = max(2.0, min(height, width) / cells)
    small = (max(1, round(height / step)), max(1, round(width / step)))
    coarse = F.interpolate(patch[None].float(), size=small, mode="area")
    if method == "pixelate":
        back = F.interpolate(coarse, size=(height, width), mode="nearest")
    else:
        back = F.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    return back[0].round().clamp(0, 255).to(patch.dtype)


class Nv12Redactor:
    """Hides boxes and polygons on NV12 device pictures; polygon masks made once per size."""

    def __init__(self, method: Method, cells: int, bgr: tuple[int, int, int]) -> None:
        self.method, self.cells = method, cells
        self.yuv = yuv_of(bgr)
        self._masks: dict[tuple[int, ...], Any] = {}

    def redact(
        self, picture: DeviceNV12, boxes: list[np.ndarray], polygons: list[np.ndarray]
    ) -> DeviceNV12:
        """A new picture, the regions hidden (the original is left as it was)."""
        import torch

        if picture.ready is not None:  # the decoder wrote it on a stream of its own
            torch.cuda.current_stream(picture.tensor.device).wait_event(picture.ready)
        out = picture.tensor.clone()
        height, width = picture.height, picture.shape[1]
        luma = out[:height]
        chroma = out[height:].view(height // 2, width // 2, 2)
        for box in boxes:
            region = even_box(box, width, height)
            if region is not None:
                self._hide(luma, chroma, region, None)
        for polygon in polygons:
            corners = np.array([*polygon.min(axis=0), *polygon.max(axis=0)], np.float32)
            region = even_box(corners, width, height)
            if region is not None:
                self._hide(luma, chroma, region, self._mask(polygon, region, out.device))
        ready = None
        if out.is_cuda:
            ready = torch.cuda.Event()
            ready.record()
        return DeviceNV12(out, ready, picture.pts, picture.time_base)

    def _hide(self, luma: Any, chroma: Any, region: tuple[int, int, int, int], mask: Any) -> None:
        x0, y0, x1, y1 = region
        y_patch = luma[y0:y1, x0:x1][None]
        y_new = hidden_planes(y_patch, self.method, self.cells, self.yuv[:1])
        uv_patch = chroma[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2].permute(2, 0, 1)
        uv_new = hidden_planes(uv_patch, self.method, self.cells, self.yuv[1:])
        if mask is not None:
            y_new = y_new.where(mask[None], y_patch)
            uv_new = uv_new.where(mask[None, ::2, ::2], uv_patch)
        luma[y0:y1, x0:x1] = y_new[0]
        chroma[y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = uv_new.permute(1, 2, 0)

    def _mask(self, polygon: np.ndarray, region: tuple[int, int, int, int], device: Any) -> Any:
        import torch

        key = (*region, *np.round(polygon).astype(int).ravel())
        mask = self._masks.get(key)
        if mask is None:
            x0, y0, x1, y1 = region
            drawn = np.zeros((y1 - y0, x1 - x0), np.uint8)
            cv2.fillPoly(drawn, [np.round(polygon - (x0, y0)).astype(np.int32)], 255)
            mask = self._masks[key] = torch.from_numpy(drawn > 0).to(device)
        return mask
