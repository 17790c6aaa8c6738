"""The CLI's other commands: doctor, stages, fetch."""

from __future__ import annotations

import re
from pathlib import Path

import onnxruntime as ort
import pyopencl as cl
import pytest

from vapipe.cli.main import main
from vapipe.cli.reference import keys
from vapipe.pipeline import registry
from vapipe.stages.cl_program import list_devices
from vapipe.stages.infer.backends import providers as eps


def test_doctor_reports_providers_opencl_and_codecs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    # Whatever onnxruntime build and OpenCL drivers this machine has:
    best = eps.choose("auto", ort.get_available_providers(), {})[0][0]
    assert f'providers = "auto" picks: {best}' in out
    devices = list_devices()
    for platform, device in devices:
        assert device.name.strip() in out, f"{platform} / {device.name} not reported"
        kind = "CPU" if device.type & cl.device_type.CPU else "GPU"
        assert f"{device.name.strip()} [{kind}]" in out, "device kind misnamed"
    if not devices:
        assert "no platforms or devices" in out or "unavailable" in out
    assert "PyAV" in out and "libavcodec" in out and "hardware decoders built in:" in out


def test_doctor_says_whether_live_streams_can_be_served_over_rtsp(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from vapipe.stages.media import rtsp_out

    assert main(["doctor"]) == 0
    found = rtsp_out.gst_python()
    out = capsys.readouterr().out
    assert (f"RTSP: yes, GStreamer's RTSP server through {found}" in out) == (found is not None)
    # A machine without it is told what to install
    monkeypatch.setattr(rtsp_out, "gst_python", lambda wanted=None: None)
    assert main(["doctor"]) == 0
    assert (
        "RTSP: no; GStreamer's RTSP server for the system Python is missing (Debian/Ubuntu: "
        "apt install python3-gi gir1.2-gst-rtsp-server-1.0" in capsys.readouterr().out
    )


def test_gst_python_takes_only_a_python_that_imports_the_rtsp_server(tmp_path: Path) -> None:
    from vapipe.stages.media.rtsp_out import gst_python

    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    assert gst_python(str(fake)) is None
    assert gst_python(str(tmp_path / "none")) is None


def test_stages_lists_keys_with_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stages", "nms"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[nms]  Keeps the confident boxes")
    assert "  iou (float) = 0.45: Boxes overlapping a better one by more than this" in out
    assert main(["stages", "source"]) == 0
    out = capsys.readouterr().out
    assert "  reconnect.max_s (float) = 30.0: The wait doubles up to this." in out
    assert "ReconnectConfig(" not in out, "a sub-table's default printed as a Python repr"
    assert main(["stages", "nope"]) == 2
    assert "unknown stage type 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("type_name", registry.type_names())
def test_every_stage_and_key_is_documented(type_name: str) -> None:
    cls = registry.lookup(type_name)
    assert cls is not None
    if type_name.startswith("test-"):
        pytest.skip("a test stub")
    assert (cls.__doc__ or "").strip(), f"stage class {cls.__name__} has no docstring"
    assert (cls.Config.__doc__ or "").strip(), f"{cls.Config.__name__} has no docstring"
    blank = [key.key for key in keys(cls.Config) if not key.doc]
    assert not blank, f"[{type_name}] keys without documentation: {blank}"


def test_fetch_rejects_unknown_names_and_finds_local_assets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["fetch", "sample:people", "yolox-nano"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines[0].endswith("media/people.mp4") and lines[1].endswith("models/yolox_nano.onnx")
    assert main(["fetch", "no-such-model"]) == 2
    assert "unknown name 'no-such-model'" in capsys.readouterr().err


def test_configuration_reference_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/configuration.md is what `run-pipeline stages --markdown` prints now: a key added,
    renamed or re-documented without regenerating it fails here."""
    from pathlib import Path

    assert main(["stages", "--markdown"]) == 0
    generated = capsys.readouterr().out
    committed = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert generated == committed, (
        "docs/configuration.md is stale: run-pipeline stages --markdown > docs/configuration.md"
    )
    for name in ("source", "infer", "track", "analytics", "mqtt", "webhook", "video", "events"):
        assert f'## `type = "{name}"`' in generated
    assert "| `backend[torch].device` | string |" in generated


def test_doctor_opens_the_hardware_encoders_it_lists(capsys: pytest.CaptureFixture[str]) -> None:
    import av

    from vapipe.cli.doctor import _opens

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "hardware encoders that open here" in l)  # noqa: E741
    usable = line.split(": ", 1)[1]
    for name in [] if usable == "none" else usable.split(", "):
        assert _opens(name) is None, f"doctor lists {name} as usable but it does not open"
    assert _opens("libx264") is None, "the software encoder must open"
    builtin = [n for n in av.codecs_available if n.endswith("_nvenc")]
    for name in builtin:
        if _opens(name) is not None:
            assert f"    {name}: does not open" in out


def test_help_lists_every_command_main_dispatches(capsys: pytest.CaptureFixture[str]) -> None:
    from vapipe.cli import tools
    from vapipe.cli.main import SUBCOMMANDS, dispatched

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert set(dispatched(tools)) == set(SUBCOMMANDS)
    for name in dispatched(tools):
        assert re.search(rf"^  run-pipeline {name}\b", shown, re.M), name


def test_doctor_says_whether_the_plate_models_are_installed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vapipe.stages.plates import ocr

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "models: yes, PP-OCRv6_det_small.onnx and PP-OCRv6_rec_small.onnx in " in out
    monkeypatch.setattr(ocr.importlib.util, "find_spec", lambda name: None)
    assert main(["doctor"]) == 0
    assert "models: no; the rapidocr models are not installed: pip install 'vapipe[ocr]'" in (
        capsys.readouterr().out
    )
