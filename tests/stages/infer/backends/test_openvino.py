"""OpenVINO: when ``auto`` takes it, the options it gets, and (with the onnxruntime-openvino
build installed beside the venv's, as .ci/run does) the real provider through the pipeline.

The OpenVINO build replaces the plain onnxruntime, so it lives in a folder of its own
(``pip install --no-deps --target .venv/openvino-site onnxruntime-openvino``) and the
pipeline runs in a subprocess with that folder first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import av
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, cli, read_events
from vapipe.cli import doctor
from vapipe.pipeline.errors import PipelineError
from vapipe.stages.infer.backends import openvino
from vapipe.stages.infer.backends import providers as eps
from vapipe.stages.infer.backends.onnx_runtime import OnnxRuntimeConfig

OV, CPU = openvino.PROVIDER, eps.CPU


def _site() -> Path | None:
    folder = Path(os.environ.get("VAPIPE_OPENVINO_SITE", Path(sys.prefix) / "openvino-site"))
    return folder if (folder / "onnxruntime" / "__init__.py").exists() else None


def openvino_site() -> Path:
    """The onnxruntime-openvino build's folder; CI must have it (the guard is the point)."""
    folder = _site()
    if folder is None:
        reason = (
            "no onnxruntime-openvino beside the venv: .venv/bin/pip install -q --no-deps "
            "--target .venv/openvino-site onnxruntime-openvino"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return folder


# --- which devices make auto take it ------------------------------------------------------


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (["CPU"], [CPU]),
        ([], [CPU]),
        (["CPU", "GPU.0"], [OV, CPU]),
        (["CPU", "NPU"], [OV, CPU]),
    ],
)
def test_auto_takes_openvino_only_for_a_gpu_or_npu(found: list[str], expected: list[str]) -> None:
    names, _, skipped = eps.choose("auto", [OV, CPU], {}, openvino_devices=found)
    assert names == expected and skipped == []


def test_auto_offered_leaves_other_providers_alone() -> None:
    available = ["CUDAExecutionProvider", OV, CPU]
    assert openvino.auto_offered(available, ["CPU"]) == ["CUDAExecutionProvider", CPU]
    assert openvino.auto_offered(available, ["GPU"]) == available
    assert openvino.auto_offered([CPU], []) == [CPU]


def test_named_openvino_runs_on_a_cpu_only_machine() -> None:
    names, options, skipped = eps.choose(["openvino"], [OV, CPU], {}, openvino_devices=["CPU"])
    assert names == [OV, CPU] and skipped == []
    assert options[0]["device_type"] == "CPU"


@pytest.mark.parametrize(
    ("found", "device"),
    [
        (["CPU", "NPU", "GPU.1", "GPU.0"], "GPU.1"),
        (["NPU", "CPU"], "NPU"),
        (["CPU"], "CPU"),
        ([], "CPU"),
    ],
)
def test_default_device_prefers_a_gpu_then_an_npu(found: list[str], device: str) -> None:
    assert openvino.default_device(found) == device


# --- its options ----------------------------------------------------------------------------


def test_cpu_options_give_each_worker_a_stream_and_its_threads() -> None:
    options = openvino.default_options(["CPU"], fp16=False, cache_dir="/c", workers=2, threads=1)
    assert options == {
        "device_type": "CPU",
        "precision": "FP32",
        "num_streams": "2",
        "num_of_threads": "2",
        "cache_dir": "/c",
    }


def test_one_worker_keeps_openvinos_own_streams_and_a_gpu_its_own_threads() -> None:
    options = openvino.default_options(
        ["CPU", "GPU"], fp16=True, cache_dir=None, workers=1, threads=4
    )
    assert options == {"device_type": "GPU", "precision": "FP16"}


def test_user_options_override_the_defaults_of_the_device_they_name() -> None:
    def options(given: dict[str, Any]) -> dict[str, Any]:
        _, chosen, _ = eps.choose(
            ["openvino"],
            [OV, CPU],
            {"openvino": given},
            workers=2,
            threads=1,
            openvino_devices=["CPU", "GPU"],
        )
        assert chosen[1] == {}
        return chosen[0]

    assert options({})["device_type"] == "GPU" and "num_of_threads" not in options({})
    on_cpu = options({"device_type": "CPU", "num_streams": "1"})
    assert on_cpu["num_streams"] == "1" and on_cpu["num_of_threads"] == "2"
    assert options({"device_type": "NPU"})["device_type"] == "NPU"
    assert "num_of_threads" not in options({"device_type": "NPU"})


def test_settle_gives_openvino_the_user_cache_and_logs_its_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    options: list[dict[str, Any]] = [{"device_type": "CPU", "precision": "FP32"}, {}]
    with caplog.at_level(logging.INFO, logger=openvino.__name__):
        openvino.settle("det", [OV, CPU], options, ["CPU", "GPU"], OnnxRuntimeConfig())
    assert options[0]["cache_dir"] == str(tmp_path / "vapipe" / "openvino")
    assert options[1] == {}
    assert caplog.messages == [
        f"det: OpenVINO device CPU (devices: CPU, GPU); precision FP32, "
        f"cache_dir {tmp_path / 'vapipe' / 'openvino'}"
    ]


def test_settle_keeps_a_named_cache_and_off_means_none() -> None:
    named: list[dict[str, Any]] = [{"cache_dir": "/mine"}, {}]
    openvino.settle("det", [OV, CPU], named, ["CPU"], OnnxRuntimeConfig(cache_dir="/mine"))
    assert named[0]["cache_dir"] == "/mine"
    off: list[dict[str, Any]] = [{}, {}]
    openvino.settle("det", [OV, CPU], off, ["CPU"], OnnxRuntimeConfig(cache_dir="off"))
    assert off == [{}, {}]


def test_settle_says_why_auto_passed_openvino_over(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=openvino.__name__):
        openvino.settle("det", [CPU], [{}], ["CPU"], OnnxRuntimeConfig())
        openvino.settle("det", [CPU], [{}], [], OnnxRuntimeConfig())
        openvino.settle("det", [CPU], [{}], ["CPU"], OnnxRuntimeConfig(providers=["cpu"]))
    assert caplog.messages == [f"det: {openvino.CPU_ONLY_REASON}"]


def test_fp16_applies_to_gpus_and_npus_only() -> None:
    def precision(found: list[str]) -> str:
        chosen = openvino.default_options(found, fp16=True, cache_dir=None, workers=1, threads=0)
        return str(chosen["precision"])

    assert precision(["CPU"]) == "FP32"
    assert precision(["CPU", "GPU"]) == "FP16" and precision(["NPU"]) == "FP16"


@pytest.mark.parametrize(
    ("device_type", "found", "absent"),
    [
        ("CPU", ["CPU"], []),
        ("GPU", ["CPU", "GPU.0", "GPU.1"], []),
        ("GPU.1", ["CPU", "GPU.0", "GPU.1"], []),
        ("GPU.2", ["CPU", "GPU.0", "GPU.1"], ["GPU.2"]),
        ("NPU", ["CPU"], ["NPU"]),
        ("HETERO:GPU.0,CPU", ["CPU", "GPU.0"], []),
        ("AUTO:NPU,GPU,CPU", ["CPU", "GPU"], ["NPU"]),
        ("NPU", [], []),
    ],
)
def test_absent_devices(device_type: str, found: list[str], absent: list[str]) -> None:
    assert openvino.absent_devices(device_type, found) == absent


def test_settle_refuses_a_device_openvino_does_not_list() -> None:
    with pytest.raises(PipelineError, match=r"^OpenVINO has no device GPU here \(devices: CPU\)"):
        openvino.settle(
            "det", [OV, CPU], [{"device_type": "GPU"}, {}], ["CPU"], OnnxRuntimeConfig()
        )


@pytest.mark.parametrize(
    ("requested", "fails"),
    [(["openvino"], True), ("openvino", True), (["openvino", "cpu"], False), ("auto", False)],
)
def test_a_provider_that_did_not_start(
    requested: str | list[str], fails: bool, caplog: pytest.LogCaptureFixture
) -> None:
    message = (
        "onnxruntime could not start OpenVINOExecutionProvider (its own error is printed "
        "above) and fell back to CPUExecutionProvider"
    )
    with caplog.at_level(logging.WARNING, logger=eps.__name__):
        if fails:
            with pytest.raises(PipelineError) as raised:
                eps.check_started("det", requested, OV, CPU)
            assert str(raised.value).startswith(message + "; ")
        else:
            eps.check_started("det", requested, OV, CPU)
        eps.check_started("det", requested, OV, OV)
    assert caplog.messages == ([] if fails else [f"det: {message}"])


# --- what doctor says -----------------------------------------------------------------------


def test_intel_gpus_reads_the_pci_vendor_of_each_card(tmp_path: Path) -> None:
    for card, vendor in (("card0", "0x1002"), ("card1", "0x8086\n"), ("card2", "0x10de")):
        (tmp_path / card / "device").mkdir(parents=True)
        (tmp_path / card / "device" / "vendor").write_text(vendor)
    (tmp_path / "renderD128").mkdir()
    assert openvino.intel_gpus(tmp_path) == ["card1"]
    assert openvino.intel_gpus(tmp_path / "none") == []


def test_two_builds_in_one_folder_are_found(tmp_path: Path) -> None:
    (tmp_path / "onnxruntime").mkdir()
    (tmp_path / "onnxruntime" / "__init__.py").write_text("")
    for name in ("onnxruntime", "onnxruntime_openvino"):
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    elsewhere = tmp_path / "other"
    (elsewhere / "onnxruntime_gpu-1.0.dist-info").mkdir(parents=True)
    (elsewhere / "onnxruntime_gpu-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.0\n"
    )
    code = "from vapipe.stages.infer.backends import openvino; print(openvino.onnxruntime_builds())"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{elsewhere}"}
    shown = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "['onnxruntime', 'onnxruntime-openvino']"
    assert openvino.onnxruntime_builds() == ["onnxruntime"]


def test_doctor_warns_of_two_builds_and_recommends_openvino_for_an_intel_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openvino, "onnxruntime_builds", lambda: ["onnxruntime", "onnxruntime-gpu"])
    monkeypatch.setattr(openvino, "intel_gpus", lambda: ["card0"])
    lines: list[str] = []
    doctor._onnxruntime(lines.append)
    assert lines[1] == (
        "  WARNING: 2 onnxruntime builds installed (onnxruntime, onnxruntime-gpu): their files "
        "overwrite each other; pip uninstall -y onnxruntime onnxruntime-gpu, then install one"
    )
    assert lines[-1].endswith(openvino.INSTALL)
    monkeypatch.setattr(openvino, "onnxruntime_builds", lambda: ["onnxruntime"])
    monkeypatch.setattr(openvino, "intel_gpus", lambda: [])
    lines.clear()
    doctor._onnxruntime(lines.append)
    assert not any("WARNING" in line or openvino.INSTALL in line for line in lines)


# --- the real provider, in the onnxruntime-openvino build ------------------------------------


def _short_clip(source: Path, target: Path, frames: int) -> Path:
    """The first ``frames`` frames of ``source``, re-encoded: short runs, real pictures."""
    with av.open(str(source)) as given, av.open(str(target), "w") as out:
        stream = out.add_stream("libx264", rate=24)
        decoded = given.decode(video=0)
        for index, frame in enumerate(decoded):
            if index == 0:
                stream.width, stream.height, stream.pix_fmt = frame.width, frame.height, "yuv420p"
            if index == frames:
                break
            for packet in stream.encode(frame.reformat(format="yuv420p")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return target


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _short_clip(
        asset("media", "people.mp4"), tmp_path_factory.mktemp("clip") / "people40.mp4", 40
    )


def _run(
    work: Path, clip: Path, *sets: str, site: Path | None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], list[dict[str, Any]]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    done = cli(
        str(FILE_CONFIG),
        "--set", f"cam.uri={clip}",
        "--stats", "stats.json", "--log-level", "info",
        *[arg for value in sets for arg in ("--set", value)],
        cwd=work, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    stats = json.loads((work / "stats.json").read_text())
    frames = [e for e in read_events(work / "out" / "events.jsonl") if e["event"] == "frame"]
    return done, stats, frames


def _corner_gap(p: list[float], q: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(p, q, strict=True))


def _same_detections(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Each frame's detections pair up one to one, each with the same-class one nearest it: two
    of equal score may be written in either order (seen: frame 18, two people at 0.6616)."""
    assert len(got) == len(expected) == 40
    for mine, theirs in zip(got, expected, strict=True):
        left = list(theirs["detections"])
        assert len(mine["detections"]) == len(left), mine["seq"]
        for a in mine["detections"]:
            same = [b for b in left if b["class_id"] == a["class_id"]]
            assert same, (mine["seq"], a)
            b = min(same, key=lambda b: _corner_gap(a["xyxy"], b["xyxy"]))
            left.remove(b)
            assert a["score"] == pytest.approx(b["score"], abs=2e-3), (mine["seq"], a, b)
            assert a["xyxy"] == pytest.approx(b["xyxy"], abs=0.5), (mine["seq"], a, b)


def test_openvino_detects_what_the_cpu_provider_detects(clip: Path, tmp_path: Path) -> None:
    site = openvino_site()
    (tmp_path / "ov").mkdir()
    (tmp_path / "cpu").mkdir()
    done, stats, frames = _run(
        tmp_path / "ov", clip, 'det.backend.providers=["openvino"]', site=site
    )
    _, cpu_stats, cpu_frames = _run(tmp_path / "cpu", clip, site=None)
    det = stats["stages"]["det"]
    assert det["provider"] == OV and cpu_stats["stages"]["det"]["provider"] == CPU
    assert det["max_rel_error_vs_cpu"] <= 1e-3
    assert sum(len(f["detections"]) for f in frames) >= 200
    _same_detections(frames, cpu_frames)
    # The default blob cache is OpenVINO's own folder in the user cache, and it was written.
    blobs = list((tmp_path / "ov" / "cache" / "vapipe" / "openvino").glob("*.blob"))
    assert blobs, done.stderr[-2000:]
    assert "det: OpenVINO device CPU (devices: CPU); precision FP32, num_streams 2, " in done.stderr
    assert "num_of_threads 2, cache_dir " in done.stderr


def test_openvino_options_pass_through_to_the_provider(clip: Path, tmp_path: Path) -> None:
    site = openvino_site()
    done, stats, _ = _run(
        tmp_path, clip,
        'det.backend.providers=["openvino"]', "det.backend.cache_dir=off", "det.workers=1",
        "det.backend.provider_options.openvino.device_type=CPU",
        "det.backend.provider_options.openvino.precision=ACCURACY",
        site=site,
    )  # fmt: skip
    assert stats["stages"]["det"]["provider"] == OV
    assert "det: OpenVINO device CPU (devices: CPU); precision ACCURACY" in done.stderr
    assert "num_streams" not in done.stderr and "cache_dir" not in done.stderr
    assert not (tmp_path / "cache" / "vapipe" / "openvino").exists()


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (
            "device_type=NPU.7",
            "error: stage 'det': OpenVINO has no device NPU.7 here (devices: CPU); set "
            "provider_options.openvino.device_type to one of them",
        ),
        (
            # OpenVINO's CPU refuses FP16, and onnxruntime would run its CPU provider instead.
            "precision=FP16",
            "error: stage 'det': onnxruntime could not start OpenVINOExecutionProvider (its own "
            "error is printed above) and fell back to CPUExecutionProvider; fix its "
            "provider_options or name another provider",
        ),
    ],
)
def test_an_openvino_that_cannot_start_is_one_line_naming_why(
    clip: Path, tmp_path: Path, option: str, expected: str
) -> None:
    site = openvino_site()
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path)}
    done = cli(
        str(FILE_CONFIG), "--set", f"cam.uri={clip}",
        "--set", 'det.backend.providers=["openvino"]',
        "--set", f"det.backend.provider_options.openvino.{option}",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == expected
    assert not (tmp_path / "out" / "events.jsonl").exists()


def test_auto_with_the_openvino_build_on_a_cpu_only_machine_runs_the_cpu_provider(
    clip: Path, tmp_path: Path
) -> None:
    site = openvino_site()
    done, stats, _ = _run(tmp_path, clip, site=site)
    assert stats["stages"]["det"]["provider"] == CPU
    assert openvino.CPU_ONLY_REASON in done.stderr
