"""Errors name what the user typed (issue 52): a value given with ``--set`` (a path included)
names that ``--set``; input files and model paths are checked before any model loads; a
misspelt key is named, with its closest valid key, even though it also leaves a required key
missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import cli

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "configs" / "analytics.toml")
LOADED = "on CPUExecutionProvider"
"""What the log says once a model has loaded."""


def one_error(*args: str, cwd: Path) -> str:
    result = cli(*args, "--no-progress", cwd=cwd)
    assert result.returncode == 2, result.stderr[-2000:]
    assert LOADED not in result.stderr, "a model loaded before the error"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("cam.uri=nothere.mp4", "node 'cam' key 'uri': input not found: nothere.mp4"),
        ("det.model=nothere.onnx", "node 'det' key 'model': model file not found: nothere.onnx"),
        ("det.model=yolox-nan", "node 'det' key 'model': unknown model 'yolox-nan'"),
        (
            'track.appearance={model="gone/reid.onnx"}',
            "node 'track' key 'appearance.model': model file not found: gone/reid.onnx",
        ),
    ],
)
def test_a_path_given_with_set_names_that_set_before_any_model_loads(
    tmp_path: Path, override: str, expected: str
) -> None:
    error = one_error(CONFIG, "--set", override, cwd=tmp_path)
    # A table's value is not echoed (it may hold a secret); the error names what is wrong.
    shown = override.partition("=")[0] + "=***" if "={" in override else override
    assert error.startswith(f"error: --set {shown}: {expected}"), error


def test_a_path_in_the_file_names_the_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "gone.toml"
    text = (
        Path(CONFIG)
        .read_text()
        .replace('uri = "${VAPIPE_INPUT:-sample:traffic}"', 'uri = "gone.mp4"')
    )
    config.write_text(text)
    line = text.splitlines().index('uri = "gone.mp4"') + 1
    error = one_error(str(config), cwd=tmp_path)
    assert error == f"error: {config}:{line}: node 'cam' key 'uri': input not found: gone.mp4"


def test_a_misspelt_key_is_named_though_the_key_it_meant_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "typo.toml"
    config.write_text(Path(CONFIG).read_text().replace('model = "yolox-nano"', 'modle = "x"'))
    error = one_error(str(config), cwd=tmp_path)
    assert "node 'det' key 'modle': unknown key (did you mean 'model'?)" in error, error
    assert "missing required key" not in error
