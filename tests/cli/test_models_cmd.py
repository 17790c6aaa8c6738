"""``run-pipeline models``: list, info, fetch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import onnx
import pytest

from tests.conftest import ASSETS
from vapipe.cli.main import main


def test_list_names_every_model_with_its_licence_and_place(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "list"]) == 0
    table, _, hint = capsys.readouterr().out.partition("\n\n")
    rows = table.splitlines()
    from vapipe.pipeline.assets import manifest_entries

    # Some models are not in the shared assets: one closing hint says how to get them.
    assert hint.startswith("Looked in ") and "run-pipeline models fetch NAME" in hint

    header, *rows = rows
    assert header.split() == ["name", "kind", "licence", "file"]
    assert [row.split()[0] for row in rows] == list(manifest_entries("models"))
    assert rows[3].split()[0] == "yunet" and "MIT" in rows[4]
    assert "Apache-2.0" in rows[0] and "AGPL-3.0" in rows[1]
    assert rows[0].endswith(str(ASSETS / "models" / "yolox_nano.onnx"))
    # every column starts where the header's does, whatever the lengths before it
    for title in ("kind", "licence", "file"):
        start = header.index(title)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows), title
    kinds = {row.split()[0]: row[header.index("kind") :].split("  ")[0] for row in rows}
    assert kinds["yolox-nano"] == "yolox" and kinds["yunet"] == "face detector"
    assert kinds["mobilefacenet"] == "face embedding" and kinds["resnet18"] == "classifier"
    assert "?" not in kinds.values()


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


def _facts(out: str) -> dict[str, str]:
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines())


@pytest.mark.parametrize(
    ("name", "copy_as"),
    [("yolox-nano", "renamed.onnx"), ("yolov8n", "yolov8n.onnx")],
    ids=["by its pinned sha256", "by its file name"],
)
def test_info_by_name_and_by_path_agree_on_the_licence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, copy_as: str
) -> None:
    # The path first: resolving a name can note its file's hash in this process's manifest.
    original = "yolox_nano.onnx" if name == "yolox-nano" else copy_as
    shutil.copy(ASSETS / "models" / original, tmp_path / copy_as)
    assert main(["models", "info", str(tmp_path / copy_as)]) == 0
    by_path = _facts(capsys.readouterr().out)
    assert main(["models", "info", name]) == 0
    by_name = _facts(capsys.readouterr().out)
    assert by_path["licence"] == by_name["licence"]
    assert by_name["licence"].startswith(("Apache-2.0", "AGPL-3.0"))
    assert by_path["manifest"] == name


def _tiny_model(path: Path, licence: str | None) -> Path:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 8, 8])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3, 8, 8])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph)
    if licence:
        onnx.helper.set_model_props(model, {"license": licence})
    onnx.save(model, path)
    return path


def test_info_of_a_model_the_manifest_lacks_reads_its_metadata_licence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "info", str(_tiny_model(tmp_path / "zz_mine.onnx", "MIT"))]) == 0
    facts = _facts(capsys.readouterr().out)
    assert facts["licence"] == "MIT" and "manifest" not in facts
    assert main(["models", "info", str(_tiny_model(tmp_path / "zz_bare.onnx", None))]) == 0
    assert _facts(capsys.readouterr().out)["licence"].startswith("not in the manifest or the")
