"""``run-pipeline models``: list, info, fetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ASSETS
from vapipe.pipeline.cli.main import main


def test_list_names_every_model_with_its_licence_and_place(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == ["yolox-nano", "yolov8n", "yolov8n-int8"]
    assert "Apache-2.0" in rows[0] and "AGPL-3.0" in rows[1]
    assert rows[0].endswith(str(ASSETS / "models" / "yolox_nano.onnx"))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "yolox-nano",
            {"family": "yolox", "input": "images [1, 3, 416, 416] float32",
             "classes": "80, names from COCO (the model has none)", "opset": "ai.onnx 11"},
        ),
        (
            "yolov8n",
            {"family": "yolov8", "output": "output0 [1, 84, 8400]",
             "classes": "80, names from the model's metadata"},
        ),
    ],
)  # fmt: skip
def test_info_reads_the_model(
    capsys: pytest.CaptureFixture[str], model: str, expected: dict[str, str]
) -> None:
    assert main(["models", "info", model]) == 0
    facts = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    for key, value in expected.items():
        assert facts[key].strip() == value, (key, facts[key])
    assert facts["batch"].startswith("fixed 1; made batch-dynamic at load")
    assert "licence" in facts and "made" in facts


def test_info_of_a_file_that_is_not_a_model_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not onnx")
    assert main(["models", "info", str(junk)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {junk}: not a readable ONNX model")
