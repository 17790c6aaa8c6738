"""The inference backends by name. A backend is one module of this package: its config class
(the ``[nodes.NAME.backend]`` table, keyed on ``type``) beside the class that runs the model,
registered with :func:`backend`; nothing else names it. The table's union of configs and
``load_backend`` are made from what registered (Frigate's detector plugins work so: one file,
its config, found by a registry).

Every module of the package is imported once, the first time the backends are asked for:
they import nothing heavy at the top (onnxruntime and torch load when a model does).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.base import Backend

PACKAGE = "vapipe.stages.infer.backends"
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
    return dict(_types)
