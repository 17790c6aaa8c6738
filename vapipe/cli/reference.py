"""The configuration reference, read off the config classes: every key of every stage type
(sub-tables and typed tables included) with its type, default and documentation. It feeds
``run-pipeline stages``."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from vapipe.pipeline.validation import table_models

if TYPE_CHECKING:
    from vapipe.pipeline.stage import Stage


@dataclass(frozen=True)
class KeyDoc:
    key: str
    """Dotted from the node's table: ``reconnect.max_s``, ``backend[torch].device``."""
    type: str
    default: str
    doc: str


def keys(model: type[BaseModel], prefix: str = "") -> Iterator[KeyDoc]:
    """Every key of ``model``, a table's keys right after the table's own line."""
    for name, field in model.model_fields.items():
        members = table_models(field.annotation)
        if len(members) == 1:
            yield KeyDoc(prefix + name, "table", "", _doc(field))
            yield from keys(next(iter(members.values())), f"{prefix}{name}.")
        elif members:
            yield KeyDoc(prefix + name, "table, by type", "", _doc(field))
            for tag, member in members.items():
                yield from keys(member, f"{prefix}{name}[{tag}].")
        else:
            yield KeyDoc(prefix + name, _type_name(field.annotation), _default(field), _doc(field))


def _doc(field: FieldInfo) -> str:
    return " ".join((field.description or "").split())


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        value = value.model_dump()
    return toml_value(value)


def toml_value(value: Any) -> str:
    """A Python value written as TOML would write it (``true``, ``"tcp"``, ``[1, 2]``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args if a is not type(None))
    if origin is list:
        return f"array of {_type_name(args[0])}" if args else "array"
    if origin is dict:
        return "table"
    if origin is typing.Annotated:
        return _type_name(args[0])
    names = {bool: "boolean", int: "integer", float: "float", str: "string", SecretStr: "secret"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def markdown(types: dict[str, type[Stage]]) -> str:
    """The configuration reference as markdown: ``[pipeline]``, ``[queues]``, then every stage
    type with each key's type, default and meaning (docs/configuration.md)."""
    from vapipe.pipeline.config import PipelineSettings, QueueSettings, ServeSettings

    out = [
        "# Configuration reference",
        "",
        "Generated from the config classes by `run-pipeline stages --markdown`; a test fails",
        "when this file is out of date. Keys of a table in a table (`reconnect.max_s`) are set",
        "as `[nodes.NAME.reconnect]` or inline; `backend[torch].device` applies when",
        '`backend.type = "torch"`.',
        "",
    ]

    def table(title: str, doc: str, model: type[BaseModel]) -> None:
        out.extend([f"## {title}", "", " ".join(doc.split()), ""])
        out.extend(["| key | type | default | meaning |", "| --- | --- | --- | --- |"])
        for key in keys(model):
            cells = [f"`{key.key}`", key.type, key.default or "", key.doc]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")

    table("`[pipeline]`", PipelineSettings.__doc__ or "", PipelineSettings)
    table('`[queues."a ! b"]`', QueueSettings.__doc__ or "", QueueSettings)
    table("`[serve]`", ServeSettings.__doc__ or "", ServeSettings)
    for name in sorted(types):
        cls = types[name]
        if name.startswith("test-"):
            continue
        table(f'`type = "{name}"`', cls.__doc__ or "", cls.Config)
    return "\n".join(out).rstrip() + "\n"
