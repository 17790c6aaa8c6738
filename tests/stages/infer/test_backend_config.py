"""The ``[nodes.det.backend]`` table: keyed on ``type``, each type with its own keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from vapipe.pipeline import config
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.infer.backends.choice import AutoConfig
from vapipe.stages.infer.backends.onnx_runtime import OnnxRuntimeConfig
from vapipe.stages.infer.backends.pytorch import TorchConfig

REPO = Path(__file__).resolve().parents[3]
FILE_TOML = (REPO / "configs" / "file.toml").read_text(encoding="utf-8")

DET = """\
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "x.mp4"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
{det}
[nodes.nms]
type = "nms"
[nodes.events]
type = "events"
"""


def backend_of(det: str, overrides: tuple[str, ...] = ()) -> object:
    spec = config.parse(DET.format(det=det), "p.toml", overrides)
    return spec.nodes["det"].config.backend  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("det", "expected"),
    [
        pytest.param("", AutoConfig(), id="default-auto"),
        pytest.param('backend = "torch"', TorchConfig(), id="shorthand"),
        pytest.param(
            "[nodes.det.backend]\nproviders = ['cuda']",
            OnnxRuntimeConfig(providers=["cuda"]),
            id="type-defaults-to-onnxruntime",
        ),
        pytest.param(
            '[nodes.det.backend]\ntype = "torch"\ndevice = "cpu"\nfp16 = true',
            TorchConfig(device="cpu", fp16=True),
            id="torch-table",
        ),
    ],
)
def test_backend_tables(det: str, expected: object) -> None:
    assert backend_of(det) == expected


@pytest.mark.parametrize(
    ("det", "overrides", "expected"),
    [
        pytest.param(
            '[nodes.det.backend]\ntype = "onnxruntime"\ndevice = "cuda"',
            (),
            "p.toml:12: node 'det' key 'backend.device': not a key of type 'onnxruntime'; "
            "valid keys: providers, provider_options, fp16, cache_dir, io_binding, threads",
            id="device-under-onnxruntime",
        ),
        pytest.param(
            '[nodes.det.backend]\ntype = "torch"\nproviders = ["cpu"]',
            (),
            "p.toml:12: node 'det' key 'backend.providers': not a key of type 'torch'; "
            "valid keys: device, fp16",
            id="providers-under-torch",
        ),
        pytest.param(
            '[nodes.det.backend]\ntype = "tensorrt"',
            (),
            "p.toml:11: node 'det' key 'backend.type': unknown type 'tensorrt'; "
            "valid: onnxruntime, torch",
            id="unknown-type",
        ),
        pytest.param(
            'providers = ["cpu"]',
            (),
            "p.toml:10: node 'det' key 'providers': unknown key; valid keys: model, family, "
            "names_file, backend, max_batch, batch_timeout_ms, workers, interval, interval_s, "
            "input_size, rect, decode_on_device ('providers' belongs in the 'backend' table)",
            id="backend-key-on-the-node",
        ),
        pytest.param(
            "",
            ("det.backend.thread=2",),
            "--set det.backend.thread=2: node 'det' key 'backend.thread': not a key of type "
            "'onnxruntime' (did you mean 'threads'?)",
            id="set-blames-the-command-line",
        ),
    ],
)
def test_backend_errors_are_one_line(det: str, overrides: tuple[str, ...], expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        backend_of(det, overrides)
    assert str(raised.value).startswith(expected), str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(("det.backend.type=torch",), TorchConfig(), id="type-starts-afresh"),
        pytest.param(
            ("det.backend.device=cpu", "det.backend.type=torch"),
            TorchConfig(device="cpu"),
            id="type-applied-first",
        ),
        pytest.param(("det.backend=torch",), TorchConfig(), id="shorthand"),
        pytest.param(
            ('det.backend.providers=["cuda", "cpu"]',),
            OnnxRuntimeConfig(providers=["cuda", "cpu"], threads=1),
            id="providers-kept-threads-from-file",
        ),
    ],
)
def test_set_switches_backends_on_the_shipped_config(
    overrides: tuple[str, ...], expected: object
) -> None:
    spec = config.parse(FILE_TOML, "configs/file.toml", overrides)
    assert spec.nodes["det"].config.backend == expected  # type: ignore[attr-defined]
