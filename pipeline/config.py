"""TOML -> validated graph spec. Every error is one line naming the file, line, node and key.

Format::

    links = ["cam ! pre ! det ! nms ! video", "nms ! events"]

    [pipeline]              # optional
    queue_size = 8

    [nodes.cam]
    type = "source"
    uri = "sample:people"

    [queues."cam ! pre"]    # optional, per link
    size = 4
    leaky = "downstream"
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vapipe.pipeline import registry
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.stage import Stage, StageConfig


class PipelineSettings(BaseModel):
    """The optional ``[pipeline]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    name: str = ""
    """A name for logs and stats."""
    queue_size: int = Field(8, ge=1)
    """Default size of every link queue, in items."""
    drain_timeout_s: float = Field(30.0, gt=0)
    """After a stop (error or Ctrl-C), how long stages may take to drain before a hard stop."""


class QueueSettings(BaseModel):
    """One ``[queues."A ! B"]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    size: int | None = Field(None, ge=1)
    """Items the link holds; default ``pipeline.queue_size``."""
    leaky: Literal["no", "upstream", "downstream"] | None = None
    """What a full queue does: block, drop the new item, or drop the oldest. Default: ``no``,
    except on links out of a live source, where it is ``downstream``."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    stage_cls: type[Stage]
    config: StageConfig
    line: int | None


@dataclass(frozen=True)
class ConfigSpec:
    """A parsed, validated config file, before any stage exists."""

    file: str
    settings: PipelineSettings
    nodes: dict[str, NodeSpec]
    links: list[str]
    links_line: int | None
    queues: dict[str, QueueSettings]
    text: str

    def error(self, message: str, **where: Any) -> ConfigError:
        line = where.pop("line", None)
        if line is None and "node" in where:
            line = find_line(self.text, where.get("node"), where.get("key"))
        return ConfigError(message, file=self.file, line=line, **where)


_TOP_LEVEL_KEYS = ("links", "nodes", "pipeline", "queues")
_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> ConfigSpec:
    """Read, override, expand and validate a config file."""
    file = str(path)
    try:
        text = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("config file not found", file=file) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", file=file) from None
    return parse(text, file, overrides)


def parse(text: str, file: str = "<config>", overrides: Iterable[str] = ()) -> ConfigSpec:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError(
            f"invalid TOML: {message}", file=file, line=int(match.group(1)) if match else None
        ) from None

    # A type set from the command line starts its table afresh (keys of the old type would
    # not fit the new one), so those go first and the other overrides land on top.
    ordered = sorted(overrides, key=lambda o: not o.partition("=")[0].strip().endswith(".type"))
    for override in ordered:
        _apply_override(raw, override, file)
    raw = _expand_env(raw, file, text, path=())

    for key in raw:
        if key not in _TOP_LEVEL_KEYS:
            raise ConfigError(
                f"unknown top-level key{_suggest(key, _TOP_LEVEL_KEYS)}",
                file=file,
                line=find_line(text, None, key),
                key=key,
            )
    nodes_raw = raw.get("nodes")
    if not isinstance(nodes_raw, dict) or not nodes_raw:
        raise ConfigError("no [nodes.NAME] tables: a pipeline needs at least a source", file=file)
    links = raw.get("links")
    links_line = find_line(text, None, "links")
    if not isinstance(links, list) or not all(isinstance(link, str) for link in links):
        raise ConfigError(
            'missing or invalid top-level key: expected links = ["a ! b ! c", ...] '
            "(it must come before the first [table])",
            file=file,
            line=links_line,
            key="links",
        )

    settings = _validate(PipelineSettings, raw.get("pipeline", {}), file, text, table="pipeline")
    queues: dict[str, QueueSettings] = {}
    queues_raw = raw.get("queues", {})
    if not isinstance(queues_raw, dict):
        raise ConfigError('expected [queues."a ! b"] tables', file=file, key="queues")
    for link_name, table in queues_raw.items():
        queues[_normalise_link(link_name)] = _validate(
            QueueSettings, table, file, text, table=f'queues."{link_name}"'
        )

    try:
        nodes = {name: _node_spec(name, table, file, text) for name, table in nodes_raw.items()}
    except ConfigError as exc:
        raise _blame_override(exc, ordered) from None
    return ConfigSpec(file, settings, nodes, links, links_line, queues, text)


def _node_spec(name: str, table: Any, file: str, text: str) -> NodeSpec:
    line = find_line(text, name, None)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
        raise ConfigError(
            "node names are letters, digits, '_' and '-'", file=file, line=line, node=name
        )
    if not isinstance(table, dict):
        raise ConfigError("expected a table", file=file, line=line, node=name)
    params = dict(table)
    type_name = params.pop("type", None)
    if type_name is None:
        raise ConfigError("missing required key", file=file, line=line, node=name, key="type")
    if not isinstance(type_name, str):
        raise ConfigError("expected a string", file=file, line=line, node=name, key="type")
    stage_cls = registry.lookup(type_name)
    if stage_cls is None:
        valid = registry.type_names()
        raise ConfigError(
            f"unknown type '{type_name}'{_suggest(type_name, valid)}; "
            f"valid types: {', '.join(valid)}",
            file=file,
            line=find_line(text, name, "type"),
            node=name,
            key="type",
        )
    config = _validate(stage_cls.Config, params, file, text, node=name)
    return NodeSpec(name, stage_cls, config, line)


def _validate(
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
        error = exc.errors()[0]
        owner, loc = _walk(model, error["loc"])
        key = ".".join(loc) or None
        if error["type"] == "extra_forbidden":
            valid = [field for field in owner.model_fields if field != "type"]
            unknown = loc[-1] if loc else ""
            message = f"unknown key{_suggest(unknown, valid)}; valid keys: {', '.join(valid)}"
            kind = _type_tag(owner)
            if kind:
                message = f"not a key of type '{kind}'{message.removeprefix('unknown key')}"
            elif (home := _table_holding(owner, unknown)) is not None:
                message += f" ('{unknown}' belongs in the '{home}' table)"
        elif error["type"] == "unknown_type":
            tags = _union_tags(owner, loc[-1])
            given = error.get("input")
            given = given.get("type") if isinstance(given, dict) else given
            message = (
                f"unknown type {given!r}{_suggest(str(given), tags)}; valid: {', '.join(tags)}"
            )
            loc = [*loc, "type"]
            key = ".".join(loc)
        elif error["type"] == "missing":
            message = "missing required key"
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
        members = _models_of(field.annotation)
        if len(members) > 1 and parts[0] in members:
            model = members[parts.pop(0)]
        elif len(members) == 1:
            model = next(iter(members.values()))
        else:
            break
    shown.extend(parts)
    return model, shown


def _models_of(annotation: Any) -> dict[str, type[BaseModel]]:
    """Config classes an annotation admits, by their ``type`` tag (or name when untagged)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {_type_tag(annotation) or annotation.__name__: annotation}
    found: dict[str, type[BaseModel]] = {}
    for arg in get_args(annotation):
        found.update(_models_of(arg))
    return found


def _type_tag(model: type[BaseModel]) -> str | None:
    """The ``type`` literal of one member of a typed table (``torch``), else None."""
    field = model.model_fields.get("type")
    values = get_args(field.annotation) if field else ()
    return str(values[0]) if len(values) == 1 else None


def _union_tags(model: type[BaseModel], field_name: str) -> list[str]:
    field = model.model_fields.get(field_name)
    return list(_models_of(field.annotation)) if field else []


def _table_holding(model: type[BaseModel], key: str) -> str | None:
    """The sub-table of ``model`` where ``key`` is valid (a key written one level too high)."""
    for name, field in model.model_fields.items():
        if any(key in member.model_fields for member in _models_of(field.annotation).values()):
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
    shown = repr(value)
    return f"{kind} {shown[:40]}{'...' if len(shown) > 40 else ''}"


def _suggest(word: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(valid), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _normalise_link(text: str) -> str:
    return " ! ".join(part.strip() for part in text.split("!"))


def _apply_override(raw: dict[str, Any], override: str, file: str) -> None:
    """``NODE.KEY=VALUE``: VALUE is a TOML value; an unquoted word is a string."""
    path, sep, value_text = override.partition("=")
    parts = [part.strip() for part in path.split(".")]
    if not sep or len(parts) < 2 or not all(parts):
        raise ConfigError(f"--set expects NODE.KEY=VALUE, got '{override}'", file=file)
    try:
        value = tomllib.loads(f"value = {value_text}")["value"]
    except tomllib.TOMLDecodeError:
        value = value_text
    nodes = raw.setdefault("nodes", {})
    if parts[0] not in nodes:
        known = list(nodes)
        raise ConfigError(
            f"--set {override}: no node '{parts[0]}'{_suggest(parts[0], known)}; "
            f"nodes: {', '.join(known)}",
            file=file,
        )
    target = nodes[parts[0]]
    for part in parts[1:-1]:
        if len(parts) > 2 and parts[-1] == "type" and part == parts[-2]:
            target[part] = {}  # NODE.TABLE.type=X: a fresh table of that type
        elif isinstance(target.get(part), str):
            target[part] = {"type": target[part]}  # backend = "torch" shorthand, then a key
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise ConfigError(f"--set {override}: '{part}' is not a table", file=file)
    target[parts[-1]] = value


def _blame_override(error: ConfigError, overrides: list[str]) -> ConfigError:
    """An error in a value given with --set names that --set, not a line of the file."""
    if error.node is None or error.key is None:
        return error
    wanted = f"{error.node}.{error.key}".removesuffix(".type")
    for override in reversed(overrides):
        path = "".join(override.partition("=")[0].split())
        if path == wanted or path.removesuffix(".type") == wanted:
            return ConfigError(
                error.message, file=f"--set {override}", node=error.node, key=error.key
            )
    return error


def _expand_env(value: Any, file: str, text: str, path: tuple[str, ...]) -> Any:
    """``${VAR}`` and ``${VAR:-default}`` in every string value."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = os.environ.get(name)
            if found is None or (found == "" and default is not None):
                if default is None:
                    node = path[1] if len(path) > 2 and path[0] == "nodes" else None
                    key = path[-1] if path else None
                    raise ConfigError(
                        f"environment variable ${{{name}}} is not set (use ${{{name}:-default}})",
                        file=file,
                        line=find_line(text, node, key),
                        node=node,
                        key=key,
                    )
                return default
            return found

        return _ENV_PATTERN.sub(substitute, value)
    if isinstance(value, dict):
        return {key: _expand_env(item, file, text, (*path, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_env(item, file, text, path) for item in value]
    return value


def find_line(
    text: str, node: str | None, key: str | None, *, table: str | None = None
) -> int | None:
    """Best-effort line number of ``[nodes.NODE]`` (or ``[TABLE]``) and of ``key`` in it.

    tomllib keeps no positions, so this scans the text; it returns None where unsure.
    """
    if table is not None:
        wanted = table
    elif node is not None:
        wanted = f"nodes.{node}"
    else:
        wanted = ""
    header_line: int | None = None if wanted else 0
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([^\[\]]+?)\s*\]\s*(#.*)?", stripped)
        if header:
            current = re.sub(r"\s*\.\s*", ".", header.group(1)).replace('"', "").replace("'", "")
            if current == wanted.replace('"', ""):
                header_line = number
                if key is None:
                    return number
            continue
        if (
            key is not None
            and current == wanted.replace('"', "")
            and re.match(rf"""\s*["']?{re.escape(key)}["']?\s*=""", line)
        ):
            return number
    return header_line or None
