"""Resolve model and sample-media names to files, fetching from upstream when needed.

Order: ``$VAPIPE_ASSETS/<kind>/``, ``./assets/<kind>/``, the user cache
(``$XDG_CACHE_HOME/vapipe`` or ``~/.cache/vapipe``), then the manifest's upstream URL with
a sha256 check (skipped when ``VAPIPE_OFFLINE=1``). A file found locally under a manifest
name is checked against the manifest's sha256 too (``also_sha256`` lists known equivalent
exports): another file is used, with a warning that says so.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from vapipe.pipeline.errors import ConfigError, MissingDependencyError, PipelineError

log = logging.getLogger(__name__)

Kind = Literal["models", "media"]
ASSETS_ENV = "VAPIPE_ASSETS"
OFFLINE_ENV = "VAPIPE_OFFLINE"
SAMPLE_SCHEME = "sample:"
LABELS = {"models": "model", "media": "sample"}


def manifest_entries(kind: Kind) -> dict[str, dict[str, Any]]:
    from vapipe.models import manifest

    return manifest().get(kind, {})


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "vapipe"


def search_dirs(kind: Kind) -> list[Path]:
    dirs = []
    if os.environ.get(ASSETS_ENV):
        dirs.append(Path(os.environ[ASSETS_ENV]) / kind)
    dirs.append(Path("assets") / kind)
    dirs.append(cache_dir() / kind)
    return dirs


def resolve_model(name_or_path: str) -> Path:
    """A manifest name (``yolox-nano``) or a path to an ONNX file."""
    return _resolve("models", name_or_path)


def resolve_media(uri: str) -> str:
    """``sample:NAME`` to a local file path; any other URI is returned as it is."""
    if not uri.startswith(SAMPLE_SCHEME):
        return uri
    return str(_resolve("media", uri[len(SAMPLE_SCHEME) :]))


def model_entry(name_or_path: str) -> dict[str, Any]:
    """The manifest entry of a model name, or {} for a path."""
    return manifest_entries("models").get(name_or_path, {})


def model_entry_of_file(path: Path) -> tuple[str, dict[str, Any]] | None:
    """The manifest's model this file is: the one whose pinned sha256 it has, else the one
    whose file name it has (a model made here from its weights has no pinned hash)."""
    entries = manifest_entries("models")
    digest = file_sha256(path)
    for name, entry in entries.items():
        if digest in (entry.get("sha256"), *entry.get("also_sha256", ())):
            return name, entry
    for name, entry in entries.items():
        if entry.get("file") == path.name:
            return name, entry
    return None


def _resolve(kind: Kind, name: str) -> Path:
    path = local_file(kind, name)
    return path if path is not None else fetch(kind, name)


def local_file(kind: Kind, name: str) -> Path | None:
    """``name`` as a file given by path (None: a manifest name, fetched where needed); a
    path that is no file, or a name the manifest lacks, is a ConfigError. Nothing is
    fetched: the graph checks every model named before any model loads."""
    entries = manifest_entries(kind)
    if name in entries:
        return None
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if kind == "models" and (os.sep in name or path.suffix):
        raise ConfigError(f"model file not found: {name}", key="model")
    known = ", ".join(entries)
    label = "model" if kind == "models" else "sample"
    raise ConfigError(
        f"unknown {label} '{name}'; known: {known} (or give a file path)",
        key="model" if kind == "models" else "uri",
    )


def local_media(uri: str) -> str | None:
    """Where ``sample:NAME`` already lies on this machine (no download), or the URI itself
    for anything else; None for a sample not fetched yet or not in the manifest."""
    if not uri.startswith(SAMPLE_SCHEME):
        return uri
    entry = manifest_entries("media").get(uri[len(SAMPLE_SCHEME) :])
    if entry is None:
        return None
    found = (folder / entry["file"] for folder in search_dirs("media"))
    return next((str(path) for path in found if path.is_file()), None)


class AssetMissing(PipelineError):
    """A manifest entry that is neither on this machine nor downloadable now."""

    def __init__(self, kind: Kind, name: str, looked: str, reason: str) -> None:
        self.kind, self.name, self.reason = kind, name, reason
        self.file = manifest_entries(kind)[name]["file"]
        super().__init__(f"{LABELS[kind]} '{name}' ({self.file}) not found in {looked}; {reason}")


def fetch(kind: Kind, name: str, *, force_download: bool = False) -> Path:
    """The local file for a manifest entry, downloading it to the cache if needed."""
    entry = manifest_entries(kind)[name]
    dirs = search_dirs(kind)
    if not force_download:
        for folder in dirs:
            candidate = folder / entry["file"]
            if candidate.is_file():
                log.debug("%s '%s' found at %s", LABELS[kind], name, candidate)
                check_local(kind, name, entry, candidate)
                return candidate
    looked = ", ".join(str(d) for d in dirs)
    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise AssetMissing(kind, name, looked, f"{OFFLINE_ENV} is set, so it was not downloaded")
    target = cache_dir() / kind / entry["file"]
    try:
        _download_entry(entry, target)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AssetMissing(
            kind, name, looked, f"downloading {entry['url']} failed: {reason}"
        ) from None
    return target


_checked: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, per process
_warned: set[str] = set()


def file_sha256(path: Path) -> str:
    info = path.stat()
    key = (str(path.resolve()), info.st_size, info.st_mtime_ns)
    if key not in _checked:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        _checked[key] = digest.hexdigest()
    return _checked[key]


def check_local(kind: Kind, name: str, entry: dict[str, Any], path: Path) -> bool:
    """Whether a local file under a manifest name is the manifest's file; a warning (once per
    file and process) when it is not."""
    expected = entry.get("sha256")
    if not expected:
        return True
    known = {expected, *entry.get("also_sha256", [])}
    digest = file_sha256(path)
    if digest in known:
        return True
    if digest not in _warned:
        _warned.add(digest)
        log.warning(
            "%s '%s' at %s is not the manifest's file (sha256 %s..., expected %s...): used as "
            "it is; 'run-pipeline fetch --force %s%s' downloads the published one to %s",
            LABELS[kind], name, path, digest[:12], expected[:12],
            "" if kind == "models" else SAMPLE_SCHEME, name, cache_dir() / kind,
        )  # fmt: skip
    return False


def _download_entry(entry: dict[str, Any], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        download = Path(tmp) / Path(entry["url"]).name
        log.info("downloading %s", entry["url"])
        digest = download_file(entry["url"], download)
        expected = entry.get("sha256")
        if expected and digest != expected:
            raise PipelineError(
                f"sha256 mismatch for {entry['url']}: expected {expected}, got {digest}"
            )
        if not expected:
            log.warning("no sha256 in the manifest for %s; not verified", entry["url"])
        if entry.get("convert"):
            from vapipe.models.convert import ConversionError, convert

            size = entry.get("input_size", [640, 640])
            try:
                convert(entry["convert"], download, target, size)
            except ConversionError as exc:
                raise PipelineError(str(exc)) from None
            except ImportError as exc:
                missing = exc.name or "ultralytics"
                raise MissingDependencyError(
                    missing, f"converting {download.name} to ONNX"
                ) from None
        else:
            shutil.move(download, target)
    log.info("saved %s", target)


def download_file(
    url: str, target: Path, timeout_s: float = 30.0, progress: IO[str] | None = None
) -> str:
    """Stream ``url`` to ``target``; return the sha256 of what was written. With
    ``progress`` (stderr on a terminal, by default) a line shows how much has arrived."""
    if progress is None and sys.stderr.isatty():
        progress = sys.stderr
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "vapipe"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response, open(target, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0)
        done = 0
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            done += len(chunk)
            if progress is not None:
                _show_progress(progress, Path(url).name, done, total)
    if progress is not None:
        progress.write("\n")
        progress.flush()
    return digest.hexdigest()


def _show_progress(stream: IO[str], name: str, done: int, total: int) -> None:
    mib = done / 2**20
    if total:
        bar = "#" * int(30 * done / total)
        line = f"{name} [{bar:<30}] {mib:.1f}/{total / 2**20:.1f} MiB"
    else:
        line = f"{name} {mib:.1f} MiB"
    stream.write(f"\r{line}\x1b[K")
    stream.flush()


@dataclass(frozen=True)
class Needed:
    """An asset a node needs before it can open."""

    kind: Kind
    name: str
    node: str


def prepare(needed: list[Needed]) -> None:
    """Find or fetch every needed asset now, before any stage opens; what cannot be had is
    one ConfigError (exit 2) naming each file, where it was looked for and how to fix it."""
    missing: list[tuple[Needed, str]] = []
    reason = ""
    for item in needed:
        try:
            fetch(item.kind, item.name)
        except AssetMissing as exc:
            missing.append((item, exc.file))
            reason = exc.reason
    if not missing:
        return
    what = ", ".join(
        f"{'model' if item.kind == 'models' else 'sample'} '{item.name}' ({file}, node "
        f"'{item.node}')"
        for item, file in missing
    )
    looked = "; ".join(
        f"{kind}: " + ", ".join(str(d) for d in search_dirs(kind))
        for kind in sorted({item.kind for item, _ in missing})
    )
    names = " ".join(
        item.name if item.kind == "models" else f"{SAMPLE_SCHEME}{item.name}" for item, _ in missing
    )
    drop = ", ".join(f"{cache_dir() / item.kind / file}" for item, file in missing)
    raise ConfigError(
        f"missing {what}; looked in {looked}; {reason}. Fix it one of three ways: set "
        f"{ASSETS_ENV} to a folder holding models/ and media/; run 'run-pipeline fetch {names}' "
        f"where there is a network; or copy the files to {drop}"
    )
