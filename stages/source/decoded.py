"""A decoded I420 picture kept in its decoder's planes until something needs it as an array
(``Frame.yuv``) or copies it to a device (``copy_into``): PyAV's ``to_ndarray`` copies the
three planes into a new array, and a device front end would then copy that array again into
its staging memory. Measured on the H200 machine's 16 x 1080p run, that first copy was a
tenth of each shard's busy time."""

from __future__ import annotations

from typing import Any

import numpy as np


class DecodedI420:
    """``pipeline.frame.I420Planes`` over a PyAV ``yuv420p`` VideoFrame of even size. Holding
    the frame holds a reference to its buffers, as the array would hold its copy; FFmpeg's
    decoders never write into a frame they have output."""

    __slots__ = ("nbytes", "picture", "shape")

    def __init__(self, picture: Any) -> None:
        self.picture = picture
        self.shape = (picture.height * 3 // 2, picture.width)
        self.nbytes = self.shape[0] * self.shape[1]

    def to_array(self) -> np.ndarray:
        array: np.ndarray = self.picture.to_ndarray(format="yuv420p")
        return array

    def copy_into(self, out: np.ndarray) -> None:
        views = self._views()
        if views is None:
            out[...] = self.to_array().ravel()
            return
        start = 0
        for view in views:
            rows, cols = view.shape
            out[start : start + rows * cols].reshape(rows, cols)[...] = view
            start += rows * cols

    def luma(self) -> np.ndarray:
        view = _view(self.picture.planes[0])
        return self.to_array()[: self.picture.height] if view is None else view

    def _views(self) -> list[np.ndarray] | None:
        """Each plane as ``_view`` gives it; None when one of them is bottom-up."""
        views = []
        for plane in self.picture.planes:
            view = _view(plane)
            if view is None:
                return None
            views.append(view)
        return views


def _view(plane: Any) -> np.ndarray | None:
    """A plane as a read-only view of the decoder's buffer, each row's padding to line_size
    skipped; None for a bottom-up plane (negative stride: not a decoder's)."""
    rows, cols, line = plane.height, plane.width, plane.line_size
    if line < cols:
        return None
    view = np.ndarray((rows, cols), np.uint8, buffer=plane, strides=(line, 1))
    view.flags.writeable = False
    return view
