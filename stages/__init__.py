"""The built-in stages, one subpackage per role. Importing this package registers each type."""

from vapipe.stages import nms
from vapipe.stages.analytics import stage as analytics
from vapipe.stages.infer import stage as infer
from vapipe.stages.preprocess import stage as preprocess
from vapipe.stages.sinks import events, mqtt, video, webhook
from vapipe.stages.source import stage as source
from vapipe.stages.track import stage as track

__all__ = [
    "analytics",
    "events",
    "infer",
    "mqtt",
    "nms",
    "preprocess",
    "source",
    "track",
    "video",
    "webhook",
]
