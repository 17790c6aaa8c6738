"""Which OpenCL device runs the kernel: the first allowed one whose kernel builds (issue 28:
a CPU runtime that lists a device and cannot build for it must not be picked)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import opencl_device
from vapipe.stages import cl_program
from vapipe.stages.cl_program import OpenCLUnavailable, one_line
from vapipe.stages.preprocess import cl_kernel
from vapipe.stages.preprocess.cl_kernel import open_program

BUILD_LOG = (
    "clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\n"
    "Build on <pyopencl.Device 'cpu-generic' on 'Portable Computing Language'>:\n\n"
    "error: unknown target CPU 'generic'\n" + "note: valid target CPU values are ...\n" * 40
)


def fake(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=f"  {name} ")


@pytest.fixture
def devices(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Two devices, the first one's kernel failing to build; what was tried, in order."""
    tried: dict[str, list[str]] = {"order": []}
    listed = [fake("broken-cpu"), fake("good-cpu")]

    def build(device: SimpleNamespace, dtype: np.dtype) -> str:
        tried["order"].append(device.name.strip())
        if "broken" in device.name:
            raise OpenCLUnavailable(
                f"letterbox kernel did not build: {one_line(Exception(BUILD_LOG))}"
            )
        return f"program on {device.name.strip()}"

    monkeypatch.setattr(cl_program, "candidate_devices", lambda kind, platform: listed)
    monkeypatch.setattr(cl_kernel, "LetterboxProgram", build)
    return tried


def test_a_device_whose_kernel_does_not_build_is_passed_over(devices, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="vapipe.stages.cl_program"):
        program = open_program("auto", None, np.dtype(np.float32))
    assert program == "program on good-cpu"
    assert devices["order"] == ["broken-cpu", "good-cpu"]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "passed over: broken-cpu:" in warnings[0], warnings
    assert "\n" not in warnings[0] and "unknown target CPU" in warnings[0]


def test_no_device_that_builds_is_one_error_naming_each(monkeypatch, devices, caplog) -> None:
    monkeypatch.setattr(
        cl_program, "candidate_devices", lambda kind, platform: [fake("broken-cpu")]
    )
    with caplog.at_level(logging.WARNING), pytest.raises(OpenCLUnavailable) as caught:
        open_program("auto", None, np.dtype(np.float32))
    assert not caplog.records, "the stage warns once with this error; nothing before it"
    assert str(caught.value).startswith("broken-cpu: letterbox kernel did not build")
    assert "\n" not in str(caught.value)


def test_a_build_log_is_cut_to_one_line() -> None:
    line = one_line(Exception(BUILD_LOG))
    assert "\n" not in line and len(line) <= 200
    expected = "clBuildProgram failed: BUILD_PROGRAM_FAILURE / error: unknown target CPU 'generic'"
    assert line == expected
    repeated = "clBuildProgram failed: INVALID_BUILD_OPTIONS - " * 2 + "clBuildProgram failed: x"
    assert one_line(Exception(repeated)) == (
        "clBuildProgram failed: INVALID_BUILD_OPTIONS - clBuildProgram failed: x"
    )
    assert one_line(Exception("a - b - a - c")) == "a - b - c"
    assert one_line(Exception("first\nsecond")) == "first"
    assert one_line(Exception("short")) == "short"
    assert one_line(Exception("")) == "Exception"
    assert one_line(Exception("x" * 300), limit=50) == "x" * 47 + "..."


def test_auto_orders_gpus_before_the_rest(monkeypatch) -> None:
    cl = SimpleNamespace(device_type=SimpleNamespace(GPU=4, CPU=2))
    cpu, gpu = SimpleNamespace(name="cpu", type=2), SimpleNamespace(name="gpu", type=4)
    monkeypatch.setattr(cl_program, "pyopencl_module", lambda: cl)
    monkeypatch.setattr(cl_program, "list_devices", lambda: [("p", cpu), ("q", gpu)])
    assert cl_program.candidate_devices("auto", None) == [gpu, cpu]
    assert cl_program.candidate_devices("cpu", None) == [cpu]
    assert cl_program.candidate_devices("auto", "p") == [cpu]
    with pytest.raises(OpenCLUnavailable, match="no OpenCL GPU device"):
        cl_program.candidate_devices("gpu", "p")


def test_doctor_shows_a_failed_build_in_one_line_and_says_numpy_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vapipe.cli.main import main

    listed = cl_program.list_devices()
    if not listed:
        pytest.skip("no OpenCL device listed here")

    def broken(device: object, dtype: np.dtype) -> None:
        raise OpenCLUnavailable(f"letterbox kernel did not build: {one_line(Exception(BUILD_LOG))}")

    monkeypatch.setattr(cl_kernel, "LetterboxProgram", broken)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "letterbox kernel" in line]
    assert len(lines) == len(listed), out
    reason = "clBuildProgram failed: BUILD_PROGRAM_FAILURE / error: unknown target CPU 'generic'"
    assert all(line.endswith(f"GiB, letterbox kernel did not build: {reason}") for line in lines)
    assert 'device = "auto": no device builds the kernel; preprocessing falls back to numpy' in out
    assert 'device = "auto" picks' not in out


@pytest.mark.opencl
def test_doctor_names_the_device_whose_kernel_built(capsys: pytest.CaptureFixture[str]) -> None:
    from vapipe.cli.main import main

    chosen = opencl_device()
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f'device = "auto" picks: {chosen.name.strip()}\n' in out
    assert "letterbox kernel builds (work-group " in out


@pytest.fixture
def kinds_asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The device kinds the stage asks ``open_program`` for; each is built on whatever device
    builds the kernel here."""
    from vapipe.stages.preprocess import opencl

    asked: list[str] = []
    real = opencl.open_program

    def recorded(kind, platform, dtype):  # type: ignore[no-untyped-def]
        asked.append(kind)
        return real("auto", platform, dtype)

    monkeypatch.setattr(opencl, "open_program", recorded)
    return asked


def opened(backend: str, **config: object):  # type: ignore[no-untyped-def]
    """A preprocess node with its conventions given (no infer node), opened."""
    from vapipe.pipeline.stage import StageContext
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    settings = {"input_size": [64, 64], "placement": "center", "color": "rgb", "scale": 1.0}
    pre = PreprocessStage(
        "pre", PreprocessConfig.model_validate({"backend": backend, **settings, **config})
    )
    pre.open(StageContext("pre"))
    return pre


@pytest.mark.parametrize(("probed", "builds"), [(np.float32, 0), (np.float16, 1)])
def test_auto_runs_the_kernel_its_probe_built_without_building_again(
    device, monkeypatch: pytest.MonkeyPatch, kinds_asked: list[str], probed: type, builds: int
) -> None:
    """The probe's program is handed on (a second build would miss the program cache, whose
    key is the context); one built for another output type is not."""
    from vapipe.stages.preprocess import stage as stage_module

    program = open_program("auto", None, np.dtype(probed))  # what a GPU probe would give
    monkeypatch.setattr(stage_module, "_opencl_gpu_program", lambda dtype: program)
    pre = opened("auto")
    assert pre.backend == "opencl" and kinds_asked == ["gpu"] * builds  # auto: a GPU or nothing
    assert (pre.opencl.program is program) == (builds == 0)
    assert pre.opencl.program.dtype == np.float32
    image = np.arange(48 * 32 * 3, dtype=np.uint8).reshape(48, 32, 3)
    [done] = [*pre.process_batch([frame_of(image)]), *pre.flush()]
    expected, _ = pre.tensor(image)
    assert np.array_equal(done.tensor, expected)


def frame_of(image: np.ndarray):  # type: ignore[no-untyped-def]
    from fractions import Fraction

    from vapipe.pipeline.frame import Frame, StreamInfo

    info = StreamInfo("cam", "clip.mp4", image.shape[1], image.shape[0], Fraction(25))
    return Frame("cam", 0, 0.0, 0.0, image, info)


@pytest.mark.parametrize("kind", ["cpu", "auto"])
def test_a_named_opencl_backend_asks_for_the_device_kind_configured(
    device, kinds_asked: list[str], kind: str
) -> None:
    """``auto``'s GPU-only rule is for the backend ``auto``: ``backend = "opencl"`` asks for
    the configured ``device``, a CPU runtime included."""
    pre = opened("opencl", device=kind)
    assert kinds_asked == [kind] and pre.device_name.startswith("opencl: ")


def test_a_named_opencl_backend_without_a_device_falls_back_to_numpy_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from vapipe.stages.preprocess import opencl

    def none_builds(kind, platform, dtype):  # type: ignore[no-untyped-def]
        raise OpenCLUnavailable("no OpenCL device")

    monkeypatch.setattr(opencl, "open_program", none_builds)
    with caplog.at_level(logging.WARNING):
        pre = opened("opencl", input_size=[64, 48])
    assert "pre: OpenCL unavailable (no OpenCL device); using the numpy backend" in caplog.text
    assert pre.front is None and pre.stats() == {"device": "numpy"}
    image = np.arange(48 * 32 * 3, dtype=np.uint8).reshape(48, 32, 3)
    [done] = [*pre.process_batch([frame_of(image)]), *pre.flush()]
    assert done.tensor.shape == (3, 48, 64)
