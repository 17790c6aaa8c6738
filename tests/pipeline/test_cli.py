"""The CLI's other commands: doctor, stages, fetch."""

from __future__ import annotations

import pytest

from vapipe.pipeline.cli import main


def test_doctor_reports_providers_opencl_and_codecs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert 'providers = "auto" picks: CPUExecutionProvider' in out
    assert "letterbox kernel builds" in out, "the PoCL device should build the kernel"
    assert "work-group multiple" in out
    assert "PyAV" in out and "libavcodec" in out and "hardware decoders built in:" in out


def test_stages_lists_keys_with_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stages", "nms"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[nms]")
    assert "  iou (default 0.45): Boxes overlapping a better one by more than this" in out
    assert main(["stages", "nope"]) == 2
    assert "unknown stage type 'nope'" in capsys.readouterr().err


def test_fetch_rejects_unknown_names_and_finds_local_assets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["fetch", "sample:people", "yolox-nano"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines[0].endswith("media/people.mp4") and lines[1].endswith("models/yolox_nano.onnx")
    assert main(["fetch", "no-such-model"]) == 2
    assert "unknown name 'no-such-model'" in capsys.readouterr().err
