"""Concrete stages. Importing this package registers every built-in stage type."""

from . import events, infer, nms, preprocess, source, video

__all__ = ["events", "infer", "nms", "preprocess", "source", "video"]
