"""What the command line and the environment change in a config before it is validated:
``--set NODE.KEY=VALUE`` overrides and ``${VAR}`` / ``${VAR:-default}`` expansion."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from typing import Any

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.urls import mask_credentials
from vapipe.pipeline.validation import find_line, listed, suggest

SECRET_WORDS = (
    "password", "passwd", "pass", "pwd", "token", "secret", "key", "auth", "authorization",
    "credential", "credentials", "headers", "header", "cookie",
)  # fmt: skip


# Keys of the stages that are a letter or two from a secret word, and name none.
PLAIN_WORDS = frozenset(
    {"path", "thread", "threads", "shards", "batch", "segment", "read", "open", "match"}
)


def secret_looking(path: str) -> bool:
    """Whether a --set's NODE.KEY could name a secret, typos included (``mqtt.pasword``,
    ``hok.headers``): its value is then never shown."""
    words = [word for word in re.split(r"[^a-z]+", path.lower()) if word]
    return any(
        any(secret in word for secret in SECRET_WORDS)
        or (word not in PLAIN_WORDS and difflib.get_close_matches(word, SECRET_WORDS, 1, 0.6))
        for word in words
    )


# What a well-formed NODE.KEY= starts with: names joined by dots, nothing else.
_KEY_PATH = re.compile(r"\s*[\w-]+(?:\s*\.\s*[\w-]+)*\s*")


def shown(override: str, limit: int = 80) -> str:
    """An override as an error line shows it: one line, cut to ``limit`` characters, its
    value masked where the key could name a secret or the value is a table (which may hold
    one). One without ``NODE.KEY=`` (``mqtt.password:SECRET``, ``mqtt={...}``) shows only the
    name it starts with: where its value begins cannot be known."""
    path, sep, value = override.partition("=")
    lead = _KEY_PATH.match(override)
    named = lead.group() if lead else ""
    if not sep or named != path or "." not in path:
        override = named.strip() + ("..." if named != override else "")
    elif secret_looking(path) or value.lstrip().startswith("{"):
        override = f"{path}=***"
    text = mask_credentials(override.replace("\n", "\\n").replace("\r", "\\r"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def apply_override(raw: dict[str, Any], override: str, file: str) -> None:
    """``NODE.KEY=VALUE``: VALUE is a TOML value; an unquoted word is a string."""
    path, sep, value_text = override.partition("=")
    parts = [part.strip() for part in path.split(".")]
    if not sep or len(parts) < 2 or not all(parts):
        raise ConfigError(f"--set expects NODE.KEY=VALUE, got '{shown(override)}'", file=file)
    try:
        value = tomllib.loads(f"value = {value_text}")["value"]
    except tomllib.TOMLDecodeError:
        value = value_text
    nodes = raw.setdefault("nodes", {})
    if parts[0] in ("pipeline", "serve") and parts[0] not in nodes:
        # pipeline.shards=2: the [pipeline] table (so [serve]), and the tables in it
        # (pipeline.shard_resources.num_gpus=0.25).
        settings: Any = raw
        for depth, part in enumerate(parts[:-1]):
            settings = settings.setdefault(part, {})
            if not isinstance(settings, dict):
                raise ConfigError(f"[{'.'.join(parts[: depth + 1])}] is not a table", file=file)
        settings[parts[-1]] = value
        return
    if parts[0] not in nodes:
        known = list(nodes)
        raise ConfigError(
            f"--set {shown(override)}: no node '{parts[0]}'{suggest(parts[0], known)}; "
            f"nodes: {listed(known)}",
            file=file,
        )
    target = nodes[parts[0]]
    for part in parts[1:-1]:
        if parts[-1] == "type" and part == parts[-2]:
            target[part] = {}  # NODE.TABLE.type=X: a fresh table of that type
        elif isinstance(target.get(part), str):
            target[part] = {"type": target[part]}  # backend = "torch" shorthand, then a key
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise ConfigError(f"--set {shown(override)}: '{part}' is not a table", file=file)
    target[parts[-1]] = value


def blame_override(error: ConfigError, overrides: list[str]) -> ConfigError:
    """An error in a value given with --set names that --set, not a line of the file."""
    if error.key is None:
        return error
    # [pipeline] keys are named 'pipeline.KEY' in errors already.
    wanted = error.key if error.node is None else f"{error.node}.{error.key}".removesuffix(".type")
    for override in reversed(overrides):
        path = "".join(override.partition("=")[0].split())
        # The --set may give a whole table or list whose part is wrong (lines.0 of lines).
        if wanted in (path, path.removesuffix(".type")) or wanted.startswith(f"{path}."):
            return ConfigError(
                error.message, file=f"--set {shown(override)}", node=error.node, key=error.key
            )
    return error


def expand_env(value: Any, file: str, text: str, path: tuple[str, ...]) -> Any:
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
                        f"environment variable ${{{name}}} is not set: set it, or give the value "
                        f"with --set {node}.{key}=..."
                        if node and key
                        else f"environment variable ${{{name}}} is not set",
                        file=file,
                        line=find_line(text, node, key),
                        node=node,
                        key=key,
                    )
                return default
            return found

        return ENV_PATTERN.sub(substitute, value)
    if isinstance(value, dict):
        return {key: expand_env(item, file, text, (*path, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_env(item, file, text, path) for item in value]
    return value
