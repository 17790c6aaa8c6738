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

import os
import re
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vapipe.pipeline import registry
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.overrides import apply_override, blame_override, expand_env
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.pipeline.urls import register_secrets_in
from vapipe.pipeline.validation import find_line, suggest, validate


class ShardResources(BaseModel):
    """What each shard asks of a cluster (``pipeline.cluster = "ray"``)."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    num_cpus: float = Field(1.0, ge=0)
    """CPU cores, as the cluster counts them."""
    num_gpus: float = Field(0.0, ge=0)
    """GPUs; a fraction (0.25) lets several shards share one, as local shards do."""
    memory: int | None = Field(None, ge=1)
    """Bytes of memory to reserve."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources of the cluster's nodes (``{ camera_net = 1 }``)."""


class PipelineSettings(BaseModel):
    """The optional ``[pipeline]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    name: str = ""
    """A name for logs and stats."""
    queue_size: int = Field(8, ge=1, le=100_000)
    """Default size of every link queue, in items."""
    drain_timeout_s: float = Field(30.0, gt=0)
    """After a stop (error or Ctrl-C), how long stages may take to drain before a hard stop."""
    shards: int | str = 1
    """Worker processes the sources are split across, each running the graph (its own
    detector) on its share, past the GIL; events are merged here. ``"auto"``: one per 2 CPU
    cores (per 4 where every source decodes on a GPU: ``hwaccel = "nvdec"``, ``"rocdecode"``
    or ``"auto"``), at most one per source. 1: everything in this process."""
    devices: list[str] = Field(default_factory=list)
    """GPUs for the shards in turn (``["0", "1"]``: shard 0 on GPU 0, shard 1 on GPU 1, ...),
    as ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``; empty: every shard sees them all."""
    python_cpus: int | list[int] | None = None
    """CPU cores the runtime's own threads (sources, stages, sinks) run on, Linux only: a
    number N, N of the cores this process may use (shard k the k-th N in turn); a list, those
    cores. Unset: every core. For graphs bound by the interpreter lock (many streams decoded
    and inferred on a GPU): its turns pass faster among a few cores than across many. Leave
    it unset where decoding or inference runs on the CPU (pipeline/affinity.py has the
    measurements)."""
    shard_restarts: int = Field(3, ge=0, le=1000)
    """How often a shard that dies is started again with its sources before the run fails."""
    cluster: Literal["local", "ray"] = "local"
    """Where the shards run: ``"local"``, processes of this machine; ``"ray"``, actors of a
    Ray cluster (``pip install 'vapipe[ray]'``), placed by its scheduler across its nodes;
    events still come back here. See docs/cluster.md."""
    ray_address: str | None = None
    """The Ray cluster (``ray://head:10001`` or ``head:6379``); unset: ``RAY_ADDRESS``, else
    a Ray instance started on this machine for the run."""
    shard_resources: ShardResources = Field(default_factory=ShardResources)
    """With ``cluster = "ray"``: what each shard asks for (``{ num_cpus = 2, num_gpus = 0.25
    }``)."""

    @field_validator("python_cpus")
    @classmethod
    def _python_cpus(cls, value: int | list[int] | None) -> int | list[int] | None:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"expected a number of cores (1 or more) or a list, got {value}")
        listed = value if isinstance(value, list) else None
        if listed is not None and (not listed or min(listed) < 0 or len(set(listed)) < len(listed)):
            raise ValueError(f"expected core numbers (0 or more, each once), got {value}")
        return value

    @field_validator("shards", mode="before")
    @classmethod
    def _shards(cls, value: Any) -> int | str:
        if value == "auto" or (type(value) is int and 1 <= value <= 256):
            return value
        raise ValueError(f'expected a number of processes (1 to 256) or "auto", got {value!r}')


class ServeSettings(BaseModel):
    """The optional ``[serve]`` table: how ``run-pipeline serve`` adds streams and shows them."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    template: str | None = None
    """The source node a stream added at run time copies (its keys, links and outputs); the
    stream's ``options`` override keys. Default: the graph's only source."""
    preview_fps: float = Field(5.0, gt=0, le=30)
    """Most frames per second a live preview (MJPEG) sends."""
    preview_width: int = Field(640, ge=64, le=3840)
    """Width of previews and snapshots, in pixels (the height follows)."""
    preview_cpu_share: float = Field(0.1, gt=0, le=4)
    """CPU all previews together may take, in cores (0.1: a tenth of one): past it a viewer
    gets the last picture again, so that viewers never slow the pipeline."""
    events_buffer: int = Field(1000, ge=1, le=1_000_000)
    """Events waiting for one live-events client; a slower client loses the oldest."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Names a request's ``Host`` may give besides loopback ones and the address served
    on (a page on another site that rebinds its name to this machine gives its own); ``"*"``
    takes any."""
    cors_origins: list[str] = Field(default_factory=list)
    """Origins (``https://dash.example``) whose pages may call the API: they get CORS
    headers and may change streams. Default: none, only the service's own page."""
    media_roots: list[str] | None = None
    """Folders whose files a stream added over HTTP may read. Default: the working
    directory and the sample media folders (``VAPIPE_ASSETS``, ``assets/``, the cache)."""


class QueueSettings(BaseModel):
    """One ``[queues."A ! B"]`` table."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    size: int | None = Field(None, ge=1, le=100_000)
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
    serve: ServeSettings = field(default_factory=lambda: ServeSettings())
    overrides: tuple[str, ...] = ()
    """The ``--set`` overrides applied, in the order applied: an error in a value one gave
    names that ``--set``."""

    def error(self, message: str, **where: Any) -> ConfigError:
        line = where.pop("line", None)
        if line is None and "node" in where:
            line = find_line(self.text, where.get("node"), where.get("key"))
        error = ConfigError(message, file=self.file, line=line, **where)
        return blame_override(error, list(self.overrides))


_TOP_LEVEL_KEYS = ("links", "nodes", "pipeline", "queues", "serve")


def load(path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> ConfigSpec:
    """Read, override, expand and validate a config file."""
    file = str(path)
    return parse(read_config_text(file), file, overrides)


# A config of a thousand cameras is ~300 kB: anything far past that is not a config, and
# reading it whole (/dev/zero, a sparse file of gigabytes) would fill the memory first.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def read_config_text(file: str) -> str:
    """The text of a config file: a regular file of at most ``MAX_CONFIG_BYTES``, in UTF-8.
    A device, FIFO or folder is refused before it is opened (a FIFO would block the open)."""
    try:
        info = os.stat(file)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
            raise ConfigError(f"not a config file: it is {kind}", file=file)
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(_too_big(info.st_size), file=file)
        with open(file, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)  # it may have grown since
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(_too_big(len(data)), file=file)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError("config file not found", file=file) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", file=file) from None


def _too_big(size: int) -> str:
    return (
        f"not a config file: {size:,} bytes, over the {MAX_CONFIG_BYTES // 2**20} MiB a config "
        "may have"
    )


def parse(text: str, file: str = "<config>", overrides: Iterable[str] = ()) -> ConfigSpec:
    try:
        return _parse(text, file, overrides)
    except RecursionError:  # tomllib and the walks over the values recurse per nesting level
        raise ConfigError("values are nested too deeply to be a pipeline", file=file) from None


def _parse(text: str, file: str, overrides: Iterable[str]) -> ConfigSpec:
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
        apply_override(raw, override, file)
    raw = expand_env(raw, file, text, path=())
    register_secrets_in(raw)

    for key in raw:
        if key not in _TOP_LEVEL_KEYS:
            raise ConfigError(
                f"unknown top-level key{suggest(key, _TOP_LEVEL_KEYS)}",
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

    try:
        settings = validate(PipelineSettings, raw.get("pipeline", {}), file, text, table="pipeline")
    except ConfigError as exc:
        raise blame_override(exc, ordered) from None
    queues: dict[str, QueueSettings] = {}
    queues_raw = raw.get("queues", {})
    if not isinstance(queues_raw, dict):
        raise ConfigError('expected [queues."a ! b"] tables', file=file, key="queues")
    for link_name, table in queues_raw.items():
        queues[normalise_link(link_name)] = validate(
            QueueSettings, table, file, text, table=f'queues."{link_name}"'
        )

    try:
        nodes = {name: _node_spec(name, table, file, text) for name, table in nodes_raw.items()}
        serve = validate(ServeSettings, raw.get("serve", {}), file, text, table="serve")
    except ConfigError as exc:
        raise blame_override(exc, ordered) from None
    return ConfigSpec(file, settings, nodes, links, links_line, queues, text, serve, tuple(ordered))


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
            f"unknown type '{type_name}'{suggest(type_name, valid)}; "
            f"valid types: {', '.join(valid)}",
            file=file,
            line=find_line(text, name, "type"),
            node=name,
            key="type",
        )
    config = validate(stage_cls.Config, params, file, text, node=name)
    return NodeSpec(name, stage_cls, config, line)


def normalise_link(text: str) -> str:
    return " ! ".join(part.strip() for part in text.split("!"))
