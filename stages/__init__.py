"""The built-in stages, one subpackage per role. Importing this package registers each type."""

from vapipe.stages import nms
from vapipe.stages.infer import stage as infer
from vapipe.stages.preprocess import stage as preprocess
from vapipe.stages.sinks import events, video
from vapipe.stages.source import stage as source

__all__ = ["events", "infer", "nms", "preprocess", "source", "video"]
