"""The inference backends by name. A backend is one module of this package: its config class
(the ``[nodes.NAME.backend]`` table, keyed on ``type``) beside the class that runs the model,
registered with :func:`backend`; nothing else names it. The table's union of configs and
``load_backend`` are made from what registered (Frigate's detector plugins work so: one file,
its config, found by a registry).

Every module of the package is imported once, the first time the backends are asked for:
they import nothing heavy at the top (onnxruntime and torch load when a model does). A backend
of another package is a module named in the ``vapipe.backends`` entry-point group, loaded then
too (docs/writing-a-stage.md, "A backend"); one that fails to load is remembered by name
(``plugin_errors``) and logged, never hiding the others.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, TypeVar

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.base import Backend

log = logging.getLogger(__name__)

PACKAGE = "vapipe.stages.infer.backends"
ENTRY_POINT_GROUP = "vapipe.backends"
NOT_BACKENDS = frozenset({"registry", "config"})
"""This module, and the one that builds the table's union from it."""


class BackendSettings(StageConfig):
    """The base of every backend's config: ``type`` names the backend."""

    type: str


@dataclass(frozen=True)
class Request:
    """What a node asks of the backend that loads its model."""

    path: str
    """The model file."""
    name: str
    """The node (named in log lines and errors)."""
    max_batch: int
    head: Any = None
    """Chooses the YOLO head to decode inside the model, where the backend can
    (``onnx_runtime.HeadChoice``)."""
    workers: int = 1
    """Calls in flight at once on the one loaded model."""
    rect: bool = False
    """The model should take other input sizes (rect inputs), where the backend can."""


Loader = Callable[[Any, Request], Backend]
"""(its config, the request) -> the backend with the model loaded and verified."""


@dataclass(frozen=True)
class BackendType:
    key: str
    config: type[BackendSettings]
    load: Loader


_types: dict[str, BackendType] = {}
plugin_errors: dict[str, str] = {}
"""Entry-point name -> why that backend did not load."""
_found = False
_lock = threading.RLock()
L = TypeVar("L", bound=Loader)


def backend(key: str, config: type[BackendSettings]) -> Callable[[L], L]:
    """Registers ``key`` (``type = "<key>"``): its config class and the loader decorated."""

    def register(load: L) -> L:
        existing = _types.get(key)
        if existing is not None and existing.load is not load:
            raise ValueError(f"backend '{key}' registered twice: {existing.load} and {load}")
        _types[key] = BackendType(key, config, load)
        return load

    return register


def types() -> dict[str, BackendType]:
    """Every backend of the package, by key, in the order they registered."""
    global _found
    with _lock:
        if not _found:
            package = importlib.import_module(PACKAGE)
            for module in pkgutil.iter_modules(package.__path__):
                if module.name not in NOT_BACKENDS:
                    importlib.import_module(f"{PACKAGE}.{module.name}")
            _found = True
            _load_plugins()
    return dict(_types)


def _load_plugins() -> None:
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not take the built-ins down
            reason = f"{type(exc).__name__}: {exc}"
            plugin_errors[entry.name] = f"{entry.value}: {reason}"
            log.warning(
                "backend plugin '%s' (%s) failed to load: %s", entry.name, entry.value, reason
            )
