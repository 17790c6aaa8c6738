"""Stage type name -> class.

The built-in stages (``vapipe.stages``) are imported explicitly; a failure there is a broken
install and raises. Plugins come from the ``vapipe.stages`` entry-point group: each entry
names a module whose import registers its stages with :func:`register`. A plugin that fails
to load is remembered by name (``plugin_errors``) and shown by ``run-pipeline stages`` and
``doctor``; it never hides the built-ins.
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
BUILTIN_MODULE = "vapipe.stages"
_stage_types: dict[str, type[Stage]] = {}
_loaded = False
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
    importlib.import_module(BUILTIN_MODULE)
    _loaded = True
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
    load()
    return _stage_types.get(type_name)


def type_names() -> list[str]:
    load()
    return sorted(_stage_types)


def types() -> dict[str, type[Stage]]:
    """Every stage type by name, sorted."""
    load()
    return dict(sorted(_stage_types.items()))
