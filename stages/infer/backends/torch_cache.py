"""The torch backend's compiled-model cache: the model as TorchScript, one module per padded
batch size, with what the first load measured (the check against onnxruntime), so that a
restart loads it in a fraction of a second and imports neither onnx nor onnx2torch.

An entry is one folder named by a hash of its key: the ONNX file's sha256, the torch,
onnx2torch and vapipe versions, the device (type and name), the dtype and the batch sizes.
``meta.json`` repeats the key and holds each module file's sha256, checked before loading: a
truncated or edited file, a key that does not match, or a module that does not load is
logged, removed and built again, never used. Writers take a file lock, so shards that start
together build an entry once and the others wait and load it; an entry appears whole (a
folder renamed into place) or not at all.

Why TorchScript: the modules are onnx2torch's graph specialised to one batch size (see
cuda_graphs.specialise), traced to plain ATen ops. torch.export and make_fx both stop at
onnx2torch's data-dependent shape checks (``if torch.any(shape == 0)`` in Reshape), where the
tracer simply records the branch taken, which is fixed at a fixed shape.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from vapipe.pipeline.assets import file_sha256
from vapipe.stages.infer.backends import fx_rewrites
from vapipe.stages.infer.backends.base import ModelInfo

log = logging.getLogger(__name__)

FORMAT = 1
"""Bumped when what is stored, or how it is made, changes: older entries are then not found."""


def content_sha256(path: str | Path) -> str:
    """The file's sha256, read now: the integrity check must not trust assets.file_sha256's
    memo (keyed by size and mtime), which an edit in place can leave unchanged."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def cache_root(setting: str) -> Path | None:
    """The folder that ``cache_dir`` names: ``auto`` is the user cache
    (``$XDG_CACHE_HOME/vapipe/compiled``), ``off`` (or empty) is no cache."""
    if setting.strip().lower() in ("", "off", "none", "false"):
        return None
    if setting == "auto":
        from vapipe.pipeline.assets import cache_dir

        return cache_dir() / "compiled"
    return Path(os.path.expanduser(setting))


@dataclass
class Entry:
    modules: dict[int, Any]
    """Batch size to TorchScript module (input at exactly that batch)."""
    info: ModelInfo
    max_error: float
    """The conversion's largest relative error against onnxruntime, measured when built."""


class ModelCache:
    """One model's entry under ``root``, for one device, dtype and set of batch sizes."""

    def __init__(self, root: Path, model_path: str, *, torch_version: str, device: str,
                 dtype: str, sizes: tuple[int, ...]) -> None:  # fmt: skip
        self.key = {
            "format": FORMAT,
            "rewrites": fx_rewrites.VERSION,
            # Memoised: a manifest model was hashed already when it was resolved.
            "model_sha256": file_sha256(Path(model_path)),
            "torch": torch_version,
            "onnx2torch": _version("onnx2torch"),
            "vapipe": _version("vapipe"),
            "device": device,
            "dtype": dtype,
            "batch_sizes": list(sizes),
        }
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()
        self.dir = root / "torch" / digest[:32]
        self.sizes = sizes

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Held while the entry is looked up and, if absent, built: one builder per key."""
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.dir.with_suffix(".lock"), "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def present(self) -> bool:
        """Whether an entry is in place (whole: it appears by a rename)."""
        return (self.dir / "meta.json").is_file()

    def load(self, torch: Any) -> Entry | None:
        """The stored entry, or None (absent, or found unusable and removed)."""
        meta_path = self.dir / "meta.json"
        if not self.dir.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("key") != self.key:
                raise ValueError("its key does not match this model and machine")
            modules = {}
            for size in self.sizes:
                name = f"batch{size}.ts"
                file = self.dir / name
                if content_sha256(file) != meta["files"][name]:
                    raise ValueError(f"{name} does not match its checksum")
                with warnings.catch_warnings():
                    # torch.jit is deprecated in favour of torch.export, which cannot take
                    # onnx2torch's graphs (see the module's docstring).
                    warnings.simplefilter("ignore", FutureWarning)
                    # Where each tensor was saved: the key holds the device, and the shape
                    # constants must stay in host memory (moved to the GPU, reading them
                    # would be a device-to-host copy, which a CUDA graph capture forbids).
                    modules[size] = torch.jit.load(str(file)).eval()
            model = meta["model"]
            info = ModelInfo(
                model["input_name"], model["input_shape"], np.dtype(np.float32),
                model["output_shape"], dict(model["metadata"]),
            )  # fmt: skip
            return Entry(modules, info, float(meta["max_error"]))
        except Exception as exc:
            log.warning(
                "compiled-model cache entry %s is unusable (%s); building it again",
                self.dir, str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )  # fmt: skip
            shutil.rmtree(self.dir, ignore_errors=True)
            return None

    def store(self, torch: Any, entry: Entry) -> None:
        """Write ``entry`` (its modules traced, on any device) whole, or leave nothing."""
        staging = self.dir.with_name(f"{self.dir.name}.tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir(parents=True)
            files = {}
            for size, module in entry.modules.items():
                name = f"batch{size}.ts"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)  # as in load
                    torch.jit.save(module, str(staging / name))
                files[name] = content_sha256(staging / name)
            info = entry.info
            meta = {
                "key": self.key,
                "files": files,
                "max_error": entry.max_error,
                "model": {
                    "input_name": info.input_name,
                    "input_shape": info.input_shape,
                    "output_shape": info.output_shape,
                    "metadata": info.metadata,
                },
            }
            (staging / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            shutil.rmtree(self.dir, ignore_errors=True)
            os.rename(staging, self.dir)
        except OSError as exc:
            # A read-only or full disk costs the next start its speed, not this run.
            log.warning("cannot write the compiled-model cache %s: %s", self.dir, exc)
            shutil.rmtree(staging, ignore_errors=True)
