"""Config tables validated against their classes, with every error on one line that names
the file, line, node and key (with a did-you-mean), as the user wrote them."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.urls import mask_credentials


def validate(
    model: type[BaseModel],
    data: Any,
    file: str,
    text: str,
    *,
    node: str | None = None,
    table: str | None = None,
) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a table, got {type(data).__name__}", file=file, node=node, key=table
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A misspelt key also makes the key it was meant to be missing: name the one typed.
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        owner, loc = _walk(model, error["loc"])
        key = ".".join(loc) or None
        if error["type"] == "extra_forbidden":
            valid = [field for field in owner.model_fields if field != "type"]
            unknown = loc[-1] if loc else ""
            message = f"unknown key{suggest(unknown, valid)}; valid keys: {', '.join(valid)}"
            kind = _type_tag(owner)
            if kind:
                message = f"not a key of type '{kind}'{message.removeprefix('unknown key')}"
            elif (home := _table_holding(owner, unknown)) is not None:
                message += f" ('{unknown}' belongs in the '{home}' table)"
        elif error["type"] == "unknown_type":
            tags = _union_tags(owner, loc[-1])
            given = error.get("input")
            given = given.get("type") if isinstance(given, dict) else given
            message = f"unknown type {given!r}{suggest(str(given), tags)}; valid: {', '.join(tags)}"
            loc = [*loc, "type"]
            key = ".".join(loc)
        elif error["type"] == "missing":
            message = "missing required key"
        elif error["type"] == "value_error":  # a config class's own check: its message as is
            message = str(error.get("ctx", {}).get("error", error["msg"]))
        else:
            message = (
                f"{error['msg'][0].lower()}{error['msg'][1:]}, got {_describe(error.get('input'))}"
            )
        line = None
        if len(loc) > 1:  # a key of a sub-table such as [nodes.cam.reconnect]
            parent = f"nodes.{node}" if node else (table or "")
            line = find_line(text, None, loc[-1], table=".".join([parent, *loc[:-1]]))
        line = line or find_line(text, node, loc[0] if loc else None, table=table)
        if table and not node:
            key = f"{table}.{key}" if key else table
        raise ConfigError(message, file=file, line=line, node=node, key=key) from None


def _walk(model: type[BaseModel], path: tuple[Any, ...]) -> tuple[type[BaseModel], list[str]]:
    """The (nested) config class that an error's ``path`` leads to, and the path as the user
    wrote it: pydantic puts the tag of a typed table (``backend``'s ``torch``) into the path."""
    shown: list[str] = []
    parts = [str(part) for part in path]
    while parts:
        part = parts.pop(0)
        shown.append(part)
        field = model.model_fields.get(part)
        if field is None or not parts:
            break
        members = table_models(field.annotation)
        if len(members) > 1 and parts[0] in members:
            model = members[parts.pop(0)]
        elif len(members) == 1:
            model = next(iter(members.values()))
        else:
            break
    shown.extend(parts)
    return model, shown


def table_models(annotation: Any) -> dict[str, type[BaseModel]]:
    """Config classes an annotation admits, by their ``type`` tag (or name when untagged)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {_type_tag(annotation) or annotation.__name__: annotation}
    found: dict[str, type[BaseModel]] = {}
    for arg in get_args(annotation):
        found.update(table_models(arg))
    return found


def _type_tag(model: type[BaseModel]) -> str | None:
    """The ``type`` literal of one member of a typed table (``torch``), else None."""
    field = model.model_fields.get("type")
    values = get_args(field.annotation) if field else ()
    return str(values[0]) if len(values) == 1 else None


def _union_tags(model: type[BaseModel], field_name: str) -> list[str]:
    field = model.model_fields.get(field_name)
    return list(table_models(field.annotation)) if field else []


def _table_holding(model: type[BaseModel], key: str) -> str | None:
    """The sub-table of ``model`` where ``key`` is valid (a key written one level too high)."""
    for name, field in model.model_fields.items():
        if any(key in member.model_fields for member in table_models(field.annotation).values()):
            return name
    return None


def _describe(value: Any) -> str:
    kind = {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }.get(type(value), type(value).__name__)
    shown = mask_credentials(repr(value))  # before cutting: a cut URL hides its '@'
    return f"{kind} {shown[:40]}{'...' if len(shown) > 40 else ''}"


def listed(names: Iterable[str], limit: int = 12) -> str:
    """``a, b, c``: at most ``limit`` names, then how many more (an error names them on one
    line, and a config may have thousands)."""
    names = list(names)
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more:,} more" if more > 0 else "")


def cut(text: str, limit: int = 120) -> str:
    """``text`` as an error quotes it: at most ``limit`` characters, its middle left out."""
    if len(text) <= limit:
        return text
    keep = (limit - 5) // 2
    return f"{text[:keep]} ... {text[-keep:]}"


def suggest(word: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(valid), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def find_line(
    text: str, node: str | None, key: str | None, *, table: str | None = None
) -> int | None:
    """Best-effort line number of ``[nodes.NODE]`` (or ``[TABLE]``) and of ``key`` in it.

    tomllib keeps no positions, so this scans the text, once per text: a config of
    thousands of nodes asks for every node's line. It returns None where unsure.
    """
    if table is not None:
        wanted = table
    elif node is not None:
        wanted = f"nodes.{node}"
    else:
        wanted = ""
    found = _tables(text).get(wanted.replace('"', ""))
    if found is None:
        return None
    return _key_line(found, key) or found[0] or None


def _key_line(found: tuple[int, list[tuple[int, str]]], key: str | None) -> int | None:
    if key is None:
        return None
    pattern = re.compile(rf"""\s*["']?{re.escape(key)}["']?\s*=""")
    return next((number for number, line in found[1] if pattern.match(line)), None)


_HEADER = re.compile(r"\[\s*([^\[\]]+?)\s*\]\s*(#.*)?")
_DOTS = re.compile(r"\s*\.\s*")


@functools.lru_cache(maxsize=4)
def _tables(text: str) -> dict[str, tuple[int, list[tuple[int, str]]]]:
    """Each table's header line and its lines by name (``""``: the lines before any header);
    the first of a repeated header counts."""
    tables: dict[str, tuple[int, list[tuple[int, str]]]] = {"": (0, [])}
    lines = tables[""][1]
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.fullmatch(line.strip())
        if header:
            name = _DOTS.sub(".", header.group(1)).replace('"', "").replace("'", "")
            lines = tables.setdefault(name, (number, []))[1]
            continue
        lines.append((number, line))
    return tables
