"""A missing optional package is exit 2 and one line saying what to install, the way this
vapipe was installed (an editable checkout here: ``pip install --config-settings
editable_mode=strict -e '.[EXTRA]'``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vapipe.pipeline.errors import ConfigError, MissingDependencyError, install_hint

REPO = Path(__file__).resolve().parents[2]

# The package is hidden as an uninstalled one is: `import torch` raises ImportError.
RUN = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = ['run-pipeline', *sys.argv[2:]]\n"
    "from vapipe.__main__ import main\n"
    "sys.exit(main())\n"
)


@pytest.mark.parametrize(
    ("hidden", "args", "says"),
    [
        ("torch", ["--set", "det.backend.type=torch"],
         "node 'det': backend = \"torch\" needs the 'torch' package"),
        ("paho", ["--set", "cam.uri=sample:people"], "the mqtt sink needs the 'paho-mqtt' package"),
        ("ray", ["--set", "pipeline.cluster=ray"],
         "key 'pipeline.cluster': cluster = \"ray\" needs the 'ray' package"),
    ],
    ids=["torch", "mqtt", "ray"],
)  # fmt: skip
def test_a_missing_extra_is_exit_2_with_the_checkout_s_install_command(
    tmp_path: Path, hidden: str, args: list[str], says: str
) -> None:
    config = REPO / "configs" / ("mqtt.toml" if hidden == "paho" else "file.toml")
    extra = {"torch": "torch", "paho": "mqtt", "ray": "ray"}[hidden]
    result = subprocess.run(
        [sys.executable, "-c", RUN, hidden, str(config), "--max-frames", "2", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-2000:]
    assert says in errors[0]
    assert errors[0].endswith(
        f"pip install --config-settings editable_mode=strict -e '.[{extra}]' in {REPO}"
    )
    assert "Traceback" not in result.stderr


def test_outside_a_checkout_the_hint_is_the_package_index_s(tmp_path: Path) -> None:
    module = tmp_path / "site-packages" / "vapipe" / "pipeline" / "errors.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    assert install_hint("torch", module) == "pip install 'vapipe[torch]'"
    assert install_hint("torch") == (
        f"pip install --config-settings editable_mode=strict -e '.[torch]' in {REPO}"
    )


def test_a_missing_package_is_a_config_error_naming_what_needs_it() -> None:
    error = MissingDependencyError("ultralytics", "converting yolov8n.pt to ONNX")
    assert isinstance(error, ConfigError) and error.package == "ultralytics"
    assert str(error) == (
        "converting yolov8n.pt to ONNX needs the 'ultralytics' package: pip install ultralytics"
    )
    keyed = MissingDependencyError("ray", "x", extra="ray", key="pipeline.cluster")
    assert str(keyed).startswith("key 'pipeline.cluster': x needs the 'ray' package: ")
