"""Stage type name -> class. Built-ins and plugins register with :func:`register`;
plugins are found through the ``vapipe.stages`` entry-point group."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TypeVar

from .stage import Stage

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vapipe.stages"
_stage_types: dict[str, type[Stage]] = {}
_plugins_loaded = False

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


def load_plugins() -> None:
    """Import every module named in the entry-point group, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not take the built-ins down
            log.warning("stage plugin %s (%s) failed to load: %s", entry.name, entry.value, exc)
    if not _stage_types:
        # Running from a source tree that was never pip-installed: no entry points.
        import stages  # noqa: F401


def lookup(type_name: str) -> type[Stage] | None:
    load_plugins()
    return _stage_types.get(type_name)


def type_names() -> list[str]:
    load_plugins()
    return sorted(_stage_types)
