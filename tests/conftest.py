"""Shared test set-up: assets come from $VAPIPE_ASSETS; by default ../shared beside the
checkout, or where there is none, the user cache that ``run-pipeline fetch --all`` fills."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def _default_assets() -> Path:
    shared = REPO.parent / "shared"
    if shared.is_dir():
        return shared
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vapipe"


ASSETS = Path(os.environ.setdefault("VAPIPE_ASSETS", str(_default_assets()))).resolve()
os.environ["VAPIPE_ASSETS"] = str(ASSETS)
# Tests never download: an asset missing here is a set-up error, reported as such.
os.environ.setdefault("VAPIPE_OFFLINE", "1")
# A shell's background job starts with SIGINT ignored, and an ignored signal stays ignored in
# every process started from here: the Ctrl-C tests would then test nothing.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def link_tree() -> Path | None:
    """The link tree of a strict editable install of this checkout (the README's), or None
    (a wheel, or pip's import hook: nothing there can go stale)."""
    import importlib.util

    # Not vapipe itself: from the checkout's root, `import vapipe` finds its folder first.
    spec = importlib.util.find_spec("vapipe.pipeline")
    init = Path(spec.origin if spec and spec.origin else "")
    if not init.is_symlink() or init.resolve() != REPO / "pipeline" / "__init__.py":
        return None
    return init.parent.parent.parent


def unlinked_files(repo: Path, tree: Path) -> list[str]:
    """Modules of the checkout's packages that a strict editable install has not linked: it
    links each file once, so a module added since is not importable."""
    import tomllib

    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    missing = []
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        for source in (repo / folder).rglob("*.py"):
            linked = tree / package.replace(".", "/") / source.relative_to(repo / folder)
            if not linked.exists():
                missing.append(str(source.relative_to(repo)))
    return sorted(missing)


@functools.cache
def _opencl_probe() -> tuple[Any, str | None]:
    """The device ``auto`` builds the letterbox kernel on, or None and why not (one line).

    A machine can list an OpenCL CPU device whose compiler does not know its processor (the
    PoCL inside pyopencl's wheel carries LLVM 14, which cannot name an AMD CPU of family 26):
    the product then preprocesses with numpy, and says so in one warning line. Built once per
    test process: each build has a context of its own, so a second would build again."""
    import numpy as np

    from vapipe.stages.cl_program import OpenCLUnavailable, one_line
    from vapipe.stages.preprocess.cl_kernel import open_program

    try:
        return open_program("auto", None, np.dtype(np.float32)).device, None
    except OpenCLUnavailable as exc:
        return None, one_line(exc)


def opencl_unbuildable() -> str | None:
    """Why no OpenCL device here builds the letterbox kernel, or None where one does."""
    return _opencl_probe()[1]


def opencl_device() -> Any:
    """The device whose letterbox kernel built (call skip_without_opencl first)."""
    return _opencl_probe()[0]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "opencl: runs the letterbox kernel on an OpenCL device; skipped, naming why, where no "
        "device here builds it (VAPIPE_TEST_OPENCL=require fails instead)",
    )


def skip_without_opencl() -> None:
    """Skip the running test where no OpenCL device builds the kernel (fail, under
    VAPIPE_TEST_OPENCL=require: a machine that must run them)."""
    reason = opencl_unbuildable()
    if reason is None:
        return
    message = f"no OpenCL device here builds the letterbox kernel ({reason})"
    if os.environ.get("VAPIPE_TEST_OPENCL") == "require":
        pytest.fail(message)
    pytest.skip(message)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("opencl") is not None:
        skip_without_opencl()


def pytest_sessionstart(session: pytest.Session) -> None:
    tree = link_tree()
    missing = unlinked_files(REPO, tree) if tree else []
    if missing:
        pytest.exit(
            f"the editable install does not hold {', '.join(missing[:5])}: run the README's "
            "install again (pip install --config-settings editable_mode=strict -e '.[dev]')",
            returncode=4,
        )


def asset(kind: str, name: str) -> Path:
    path = ASSETS / kind / name
    if not path.is_file():
        pytest.fail(
            f"test asset {path} is missing: set VAPIPE_ASSETS to a folder holding models/ and "
            "media/ (the project's shared/ folder), or run 'run-pipeline fetch --all' (see the "
            "README)"
        )
    return path


@pytest.fixture
def people_mp4() -> Path:
    return asset("media", "people.mp4")


@pytest.fixture
def yolox_onnx() -> Path:
    return asset("models", "yolox_nano.onnx")


@pytest.fixture
def yolov8_onnx() -> Path:
    return asset("models", "yolov8n.onnx")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """A run a failed test left behind (a looping source) would eat the cores of every later
    test: whatever a test started is killed when it ends."""
    before = set(_descendants(os.getpid()))
    yield
    for pid in _descendants(os.getpid()):
        if pid not in before:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def secrets_of_this_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no secrets registered for masking: one registered by an earlier
    test (a config's password) would mask what this test shows, so a masking test could pass
    only after another one, in that order, on that worker."""
    from vapipe.pipeline import urls

    monkeypatch.setattr(urls, "_secrets", set())
