"""Stage type name -> class.

The built-in stages (``vapipe.stages``) are imported explicitly, each only when a config names
its type (a run that records no video does not pay for importing the video sink: start-up is
a product feature); a failure there is a broken install and raises. Plugins come from the
``vapipe.stages`` entry-point group: each entry names a module whose import registers its
stages with :func:`register`. A plugin that fails to load is remembered by name
(``plugin_errors``) and shown by ``run-pipeline stages`` and ``doctor``; it never hides the
built-ins.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TypeVar

from vapipe.pipeline.stage import Stage

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vapipe.stages"
BUILTIN_TYPES = {
    "analytics": "vapipe.stages.analytics.stage",
    "classify": "vapipe.stages.objects.classify",
    "clips": "vapipe.stages.sinks.clips",
    "detect_inside": "vapipe.stages.objects.detect_inside",
    "embed": "vapipe.stages.objects.embed",
    "events": "vapipe.stages.sinks.events",
    "history": "vapipe.stages.sinks.history",
    "infer": "vapipe.stages.infer.stage",
    "live": "vapipe.stages.sinks.live",
    "motion": "vapipe.stages.motion.stage",
    "mqtt": "vapipe.stages.sinks.mqtt",
    "nms": "vapipe.stages.nms",
    "preprocess": "vapipe.stages.preprocess.stage",
    "plates": "vapipe.stages.plates.stage",
    "redact": "vapipe.stages.redact.stage",
    "source": "vapipe.stages.source.stage",
    "track": "vapipe.stages.track.stage",
    "snapshots": "vapipe.stages.sinks.snapshots",
    "video": "vapipe.stages.sinks.video",
    "webhook": "vapipe.stages.sinks.webhook",
}
"""Built-in type name -> the module that registers it (tests check it against the package)."""
_stage_types: dict[str, type[Stage]] = {}
_loaded = False
_plugins_loaded = False
plugin_errors: dict[str, str] = {}
"""Entry-point name -> why that plugin did not load."""

S = TypeVar("S", bound=type[Stage])


def register(type_name: str) -> Callable[[S], S]:
    """Class decorator: make a stage class available as ``type = "<type_name>"``."""

    def decorate(cls: S) -> S:
        existing = _stage_types.get(type_name)
        if existing is not None and existing is not cls:
            raise ValueError(f"stage type '{type_name}' registered twice: {existing} and {cls}")
        cls.type_name = type_name
        _stage_types[type_name] = cls
        return cls

    return decorate


def load() -> None:
    """Import the built-ins, then every plugin of the entry-point group; once."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_TYPES.values():
        importlib.import_module(module)
    _loaded = True
    _load_plugins()


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not take the built-ins down
            reason = f"{type(exc).__name__}: {exc}"
            plugin_errors[entry.name] = f"{entry.value}: {reason}"
            log.warning(
                "stage plugin '%s' (%s) failed to load: %s", entry.name, entry.value, reason
            )


def lookup(type_name: str) -> type[Stage] | None:
    """The class of ``type_name``: a built-in's own module is imported, nothing else; any
    other name loads the plugins."""
    module = BUILTIN_TYPES.get(type_name)
    if module is not None:
        importlib.import_module(module)
    else:
        _load_plugins()
    return _stage_types.get(type_name)


def type_names() -> list[str]:
    _load_plugins()
    return sorted(set(BUILTIN_TYPES) | set(_stage_types))


def types() -> dict[str, type[Stage]]:
    """Every stage type by name, sorted."""
    load()
    return dict(sorted(_stage_types.items()))
