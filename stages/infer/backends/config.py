"""The ``[nodes.NAME.backend]`` table: the config of the backend its ``type`` names, each
backend's config declared beside it in its own module (registry.py), and ``backend = "torch"``
short for ``backend = { type = "torch" }``. A key that belongs to another backend is an error
(``device`` under onnxruntime, say); a table without ``type`` is ``onnxruntime``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Discriminator, Tag

from vapipe.stages.infer.backends.registry import BackendSettings, types

__all__ = ["BackendConfig", "backend_shorthand", "config_of"]


def backend_shorthand(data: Any) -> Any:
    """A node's raw keys with ``backend = "torch"`` made ``backend = { type = "torch" }``
    (a ``mode="before"`` validator of every node that takes a backend)."""
    if isinstance(data, dict) and isinstance(data.get("backend"), str):
        return {**data, "backend": {"type": data["backend"]}}
    return data


def _backend_type(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "onnxruntime")
        return kind if isinstance(kind, str) else None
    return value.type if isinstance(value, BackendSettings) else None


def config_of(key: str) -> type[BackendSettings]:
    """The config class of backend ``key`` (``auto``: the default table)."""
    return types()[key].config


def _union() -> Any:
    members = tuple(Annotated[t.config, Tag(key)] for key, t in types().items())
    return Annotated[
        Union[members],  # noqa: UP007 - a union of classes known only when the backends load
        Discriminator(
            _backend_type,
            custom_error_type="unknown_type",
            custom_error_message="unknown backend type",
        ),
    ]


if TYPE_CHECKING:
    BackendConfig = BackendSettings
else:
    BackendConfig = _union()
