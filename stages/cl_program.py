"""One OpenCL program helper for every kernel of the project (the letterbox of
stages/preprocess, the object crops of stages/crops): pyopencl imported or a clear error, the
devices a ``kind`` and ``platform`` allow, a kernel's source with the shared I420 helper, a
program built once per context and build options (compiler chatter silenced), the first allowed
device where a kernel builds, and an OpenCL error in one line."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL device, or the program would not build."""


def pyopencl_module() -> Any:
    try:
        import pyopencl
    except ImportError as exc:
        raise OpenCLUnavailable(f"pyopencl is not importable ({exc})") from None
    return pyopencl


def list_devices() -> list[tuple[str, Any]]:
    """(platform name, device) for every device of every platform; [] without OpenCL."""
    cl = pyopencl_module()
    found: list[tuple[str, Any]] = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    for platform in platforms:
        try:
            found.extend((platform.name, device) for device in platform.get_devices())
        except cl.Error:
            continue
    return found


def select_device(kind: str = "auto", platform: str | None = None) -> Any:
    """``kind``: auto (a GPU if there is one, else anything), gpu, or cpu; ``platform``: a
    case-insensitive part of the platform name."""
    return candidate_devices(kind, platform)[0]


def candidate_devices(kind: str = "auto", platform: str | None = None) -> list[Any]:
    """The devices ``kind`` and ``platform`` allow, most wanted first (GPUs before the rest
    for ``auto``); raises OpenCLUnavailable where there is none."""
    cl = pyopencl_module()
    candidates = [
        (name, dev)
        for name, dev in list_devices()
        if platform is None or platform.lower() in name.lower()
    ]
    if not candidates:
        where = f" on a platform matching '{platform}'" if platform else ""
        raise OpenCLUnavailable(f"no OpenCL device{where}")
    wanted = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU}.get(kind)
    if wanted is not None:
        matches = [c for c in candidates if c[1].type & wanted]
        if not matches:
            raise OpenCLUnavailable(
                f"no OpenCL {kind.upper()} device (found: "
                f"{', '.join(d.name.strip() for _, d in candidates)})"
            )
        return [device for _, device in matches]
    gpus = [c for c in candidates if c[1].type & cl.device_type.GPU]
    return [device for _, device in gpus + [c for c in candidates if c not in gpus]]


def first_building(kind: str, platform: str | None, make: Callable[[Any], T]) -> T:
    """``make(device)`` on the first allowed device where it does not raise
    OpenCLUnavailable (a kernel that will not build there).

    A runtime can list a device and still fail to build for it (a CPU runtime whose LLVM
    does not know this processor, say): that device is passed over, so ``auto`` never picks
    a device it cannot use. One warning line names what was passed over when another device
    is used; where none builds, the error names each (the caller warns once)."""
    failures = []
    for device in candidate_devices(kind, platform):
        try:
            made = make(device)
        except OpenCLUnavailable as exc:
            failures.append(f"{device.name.strip()}: {exc}")
            continue
        if failures:
            log.warning("OpenCL device passed over: %s", "; ".join(failures))
        return made
    raise OpenCLUnavailable("; ".join(failures))


def one_line(error: Exception, limit: int = 200) -> str:
    """An OpenCL error in one line: a failed build's text carries the whole build log, whose
    first ``error`` line is the reason (after a "Build on <device>" header)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    # pyopencl repeats its message once per device it tried: "X - X - X".
    head = " - ".join(dict.fromkeys(lines[0].split(" - ")))
    reason = next((line for line in lines[1:] if "error" in line.lower()), None)
    text = f"{head} / {reason}" if reason else head
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kernel_source(package: str, name: str) -> str:
    """An OpenCL program's text: the shared I420 helper, then ``kernels/NAME`` of
    ``package``."""
    shared = files("vapipe.stages.preprocess").joinpath("kernels/i420.cl")
    own = files(package).joinpath(f"kernels/{name}")
    return shared.read_text(encoding="utf-8") + "\n" + own.read_text(encoding="utf-8")


def build_options(cl: Any, device: Any, *extra: str) -> list[str]:
    """``extra`` and, where the device can, correctly rounded division and square roots (the
    numpy path's arithmetic)."""
    options = list(extra)
    if device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
        options.append("-cl-fp32-correctly-rounded-divide-sqrt")
    return options


_programs: dict[tuple[int, str, str], Any] = {}
_programs_lock = threading.Lock()


def built_program(
    cl: Any, context: Any, name: str, source: Callable[[], str], options: Sequence[str]
) -> Any:
    """Kernel ``name``'s program for ``context`` and ``options``, built once (per process) and
    kept; raises OpenCLUnavailable with the build's reason in one line."""
    key = (context.int_ptr, name, " ".join(options))
    with _programs_lock:
        program = _programs.get(key)
        if program is None:
            try:
                # A compiler that reports progress ("Compilation started", Intel's CPU runtime)
                # makes pyopencl warn on every build: noise, not a fault.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                    program = cl.Program(context, source()).build(options=list(options))
            except cl.Error as exc:
                raise OpenCLUnavailable(f"{name} kernel did not build: {one_line(exc)}") from None
            _programs[key] = program
    return program
