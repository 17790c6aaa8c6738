"""Decoding on a GPU's video decoders (``hwaccel = "nvdec"`` / ``"auto"``), through a stand-in
for NVIDIA's library (tests/fakes/pynvvideocodec.py: FFmpeg's decoder behind NVDEC's calls)
and torch's CPU device: every frame arrives as an NV12 picture on the device with the
software path's timestamps and pixels; a stream the hardware does not take, a process without
the library and a decoder that fails mid-stream all decode in software, with one log line."""

from __future__ import annotations

import logging
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import numpy as np
import pytest

from tests.conftest import asset
from tests.fakes import pynvvideocodec, rocpydecode
from vapipe.pipeline.device_picture import DeviceNV12, i420_to_nv12, nv12_to_i420
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.stage import StageContext
from vapipe.stages.source import nvdec, rocdecode
from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.stage import VideoSource

torch = pytest.importorskip("torch")


@pytest.fixture
def fake_nvdec(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The stand-in library, its pictures on torch's CPU device; the decoders it made."""
    created: list[Any] = []
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module(created=created))
    monkeypatch.setattr(nvdec, "cuda_device", lambda torch, gpu: torch.device("cpu"))
    return created


def read(uri: str, **keys: Any) -> tuple[VideoSource, list[Any]]:
    source = VideoSource("cam", SourceConfig(uri=uri, **keys))
    source.open(StageContext("cam"))
    frames = [item for item in source.frames()]
    source.close()
    return source, frames


def encode(path: Path, codec: str, frames: int = 12, **context: Any) -> str:
    """A small clip of moving noise blocks in ``codec``; ``context`` sets codec context
    fields (``color_range``...)."""
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        for key, value in context.items():
            setattr(stream.codec_context, key, value)
        for index in range(frames):
            image = rng.integers(0, 256, (96, 128, 3), np.uint8)
            image[:, index * 8 : index * 8 + 16] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return str(path)


@pytest.mark.parametrize("clip", ["people", "traffic"])
def test_nvdec_frames_are_the_software_frames_left_on_the_device(
    fake_nvdec: list[Any], clip: str
) -> None:
    uri = str(asset("media", f"{clip}.mp4"))
    software, expected = read(uri)
    source, frames = read(uri, hwaccel="nvdec")
    assert len(frames) == len(expected) > 100
    assert all(isinstance(frame.i420(), DeviceNV12) for frame in frames)
    assert [f.pts for f in frames] == [f.pts for f in expected]
    assert [f.seq for f in frames] == list(range(len(frames)))
    for index in (0, 1, 57, len(frames) - 1):  # B-frames reordered, the drained tail
        assert np.array_equal(frames[index].yuv, expected[index].yuv), index
    assert np.array_equal(frames[-1].image, expected[-1].image)
    assert source.stats()["decoder"] == "nvdec"
    assert source.stats()["frames_as_yuv420"] == len(frames)
    assert software.stats()["decoder"] == "software"
    assert len(fake_nvdec) == 1  # one decoder for the stream


def test_each_picture_is_copied_out_of_the_decoders_surface_pool(fake_nvdec: list[Any]) -> None:
    """The decoder writes later pictures over earlier ones' surfaces: each frame must hold its
    own copy, or a frame read after the next packets shows a later picture."""
    uri = str(asset("media", "people.mp4"))
    _, expected = read(uri)
    _, frames = read(uri, hwaccel="nvdec")
    held = [frame.i420().tensor for frame in frames[:6]]
    assert not any(a.data_ptr() == b.data_ptr() for a in held for b in held if a is not b)
    for frame, want in zip(frames[:6], expected[:6], strict=True):
        assert np.array_equal(frame.luma(), want.luma())


def test_a_looped_file_keeps_its_decoder_from_pass_to_pass(fake_nvdec: list[Any]) -> None:
    """Making a decoder is slow (some 290 ms on the H100 machine): a new session of the same
    codec (a loop's next pass, a reconnect) goes on the one it has."""
    uri = str(asset("media", "people.mp4"))
    count = len(read(uri)[1])
    source = VideoSource("cam", SourceConfig(uri=uri, hwaccel="nvdec", loop=True))
    source.open(StageContext("cam"))
    frames = source.frames()
    taken = [next(frames) for _ in range(count + 5)]
    source.stop()
    assert len(fake_nvdec) == 1
    assert all(isinstance(f.i420(), DeviceNV12) for f in taken)
    first = read(uri)[1]
    assert np.array_equal(taken[count + 3].yuv, first[3].yuv)  # the second pass's pictures
    assert [f.seq for f in taken] == list(range(count + 5))
    assert taken[count].pts > taken[count - 1].pts


def test_a_codec_nvdec_does_not_take_decodes_in_software(
    fake_nvdec: list[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clip = encode(tmp_path / "clip.avi", "mpeg4")
    with caplog.at_level(logging.WARNING):
        source, frames = read(clip, hwaccel="nvdec")
    assert len(frames) == 12 and not fake_nvdec
    assert not any(isinstance(f.i420(), DeviceNV12) for f in frames)
    said = [r.getMessage() for r in caplog.records if "decoding in software" in r.getMessage()]
    assert said == ["cam: decoding in software (NVDEC is not used for mpeg4 here (H.264 and "
                    "HEVC only))"]  # fmt: skip
    assert source.stats()["decoder"].startswith("software (NVDEC is not used for mpeg4")


def test_bt709_pictures_stay_in_software_from_their_first_frame(
    fake_nvdec: list[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """BT.709 pictures do not travel as plain I420 on the software path either (their colours
    need swscale's matrix): the first picture says so, before any reaches the hardware."""
    clip = encode(tmp_path / "bt709.mp4", "libx264", colorspace=1)
    _, expected = read(clip)
    with caplog.at_level(logging.WARNING):
        _, frames = read(clip, hwaccel="nvdec")
    assert not fake_nvdec
    assert [f.pts for f in frames] == [f.pts for f in expected] and len(frames) == 12
    assert np.array_equal(frames[3].image, expected[3].image)
    assert any("not plain 4:2:0" in r.getMessage() for r in caplog.records)


def test_full_range_streams_are_refused_before_decoding(
    fake_nvdec: list[Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clip = encode(tmp_path / "full.mp4", "libx264", color_range=2)
    with caplog.at_level(logging.WARNING):
        _, frames = read(clip, hwaccel="nvdec")
    assert len(frames) == 12 and not fake_nvdec
    assert any("yuvj420p pictures (NVDEC" in r.getMessage() for r in caplog.records)


def test_a_decoder_that_fails_mid_stream_hands_the_stream_to_software(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module(fail_after=40))
    monkeypatch.setattr(nvdec, "cuda_device", lambda torch, gpu: torch.device("cpu"))
    uri = str(asset("media", "people.mp4"))
    _, expected = read(uri)
    with caplog.at_level(logging.WARNING):
        source, frames = read(uri, hwaccel="nvdec")
    on_device = [isinstance(f.i420(), DeviceNV12) for f in frames]
    assert on_device[0] and not on_device[-1]
    assert on_device == sorted(on_device, reverse=True)  # device, then software to the end
    # The software decoder picks the stream up at its next keyframe: frames between are lost,
    # none is repeated or concealed, and the timeline still runs forward.
    pts = [f.pts for f in frames]
    assert pts == sorted(set(pts)) and set(pts) <= {f.pts for f in expected}
    assert len(expected) > len(frames) > on_device.count(True)
    first_software = on_device.index(False)
    by_pts = {f.pts: f for f in expected}
    assert np.array_equal(frames[first_software].yuv, by_pts[pts[first_software]].yuv)
    said = [r.getMessage() for r in caplog.records if "failed mid-stream" in r.getMessage()]
    assert len(said) == 1 and "CUDA_ERROR_LAUNCH_FAILED" in said[0]
    assert source.stats()["decoder"].startswith("software (nvdec failed mid-stream")


def test_without_the_library_auto_decodes_in_software_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # import fails
    uri = str(asset("media", "people.mp4"))
    with caplog.at_level(logging.INFO, logger="vapipe.stages.source.hardware"):
        source, frames = read(uri, hwaccel="auto", loop=False)
    assert frames and not any(isinstance(f.i420(), DeviceNV12) for f in frames)
    records = [r for r in caplog.records if "decoding in software" in r.getMessage()]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    assert "PyNvVideoCodec is not installed (pip install 'vapipe[nvdec]')" in records[0].message
    assert source.stats()["decoder"].startswith("software (nvdec: PyNvVideoCodec is not")


def test_asking_for_nvdec_where_it_cannot_work_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module())
    uri = str(asset("media", "people.mp4"))
    with caplog.at_level(logging.INFO, logger="vapipe.stages.source.hardware"):
        _, frames = read(uri, hwaccel="nvdec")
    assert frames and not any(isinstance(f.i420(), DeviceNV12) for f in frames)
    records = [r for r in caplog.records if "decoding in software" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert "nvdec: torch sees no CUDA GPU" in records[0].message


def test_a_session_of_another_codec_gets_a_decoder_of_its_own(fake_nvdec: list[Any]) -> None:
    def stream(codec: str) -> Any:
        context = type("Context", (), {"name": codec})
        return type("Stream", (), {"codec_context": context, "time_base": Fraction(1, 25)})

    backend = nvdec.NvdecBackend(0)
    with av.open(str(asset("media", "people.mp4"))) as container:
        decoder = backend.open(container.streams.video[0])
        assert decoder.restart(container.streams.video[0])
    assert not decoder.restart(stream("hevc"))


@pytest.mark.parametrize(
    ("codec", "pix_fmt", "size", "reason"),
    [
        ("h264", "yuv420p", (1920, 1080), None),
        ("hevc", "yuv420p", (7680, 4320), None),
        ("h264", "yuv420p", (7680, 4320), "7680x4320 is outside NVDEC's h264 sizes"),
        ("h264", "yuv420p", (32, 32), "32x32 is outside NVDEC's h264 sizes"),
        ("hevc", "yuv420p10le", (1920, 1080), "yuv420p10le pictures (NVDEC is used for 8-bit"),
        ("vp9", "yuv420p", (1920, 1080), "NVDEC is not used for vp9 here"),
    ],
)
def test_nvdec_refuses_what_it_does_not_decode(
    fake_nvdec: list[Any], codec: str, pix_fmt: str, size: tuple[int, int], reason: str | None
) -> None:
    context = type("Context", (), {"name": codec, "pix_fmt": pix_fmt, "width": size[0],
                                   "height": size[1]})  # fmt: skip
    video = type("Stream", (), {"codec_context": context, "time_base": Fraction(1, 90000)})
    said = nvdec.NvdecBackend(0).refuses(video)
    assert (said is None) if reason is None else (said is not None and said.startswith(reason))


def test_hwaccel_device_for_nvdec_is_a_gpu_index() -> None:
    assert SourceConfig(uri="a.mp4", hwaccel="nvdec", hwaccel_device="1").hwaccel_device == "1"
    with pytest.raises(ValueError, match="hwaccel_device: nvdec takes a GPU index"):
        SourceConfig(uri="a.mp4", hwaccel="nvdec", hwaccel_device="/dev/dri/renderD128")
    with pytest.raises(ValueError, match="'nvdecc' is not auto, nvdec, rocdecode or a device type"):
        SourceConfig(uri="a.mp4", hwaccel="nvdecc")
    assert ConfigError  # the loader turns these into one-line config errors (test_config.py)


def test_nv12_and_i420_are_the_same_picture() -> None:
    rng = np.random.default_rng(3)
    i420 = rng.integers(0, 256, (6 * 3 // 2 * 2, 8), np.uint8)  # 12 x 8 picture
    nv12 = i420_to_nv12(i420)
    assert np.array_equal(nv12[:12], i420[:12])
    assert np.array_equal(nv12[12:].reshape(-1)[0::2], i420[12:].reshape(-1)[:24])  # U
    assert np.array_equal(nv12[12:].reshape(-1)[1::2], i420[12:].reshape(-1)[24:])  # V
    assert np.array_equal(nv12_to_i420(nv12), i420)
    picture = DeviceNV12(torch.from_numpy(nv12), None, 5, Fraction(1, 25))
    assert picture.shape == (18, 8) and picture.nbytes == 144 and picture.height == 12
    assert np.array_equal(picture.luma(), i420[:12]) and np.array_equal(picture.to_array(), i420)
    out = np.zeros(144, np.uint8)
    picture.copy_into(out)
    assert np.array_equal(out, i420.ravel())


@pytest.fixture
def fake_rocdecode(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """rocPyDecode's stand-in, pictures on torch's CPU device; NVIDIA's library absent."""
    created: list[Any] = []
    package = ModuleType("pyRocVideoDecode")
    package.decoder = rocpydecode.module(created)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyRocVideoDecode", package)
    monkeypatch.setitem(sys.modules, "pyRocVideoDecode.decoder", package.decoder)
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    monkeypatch.setattr(rocdecode, "rocm_device", lambda torch, gpu: torch.device("cpu"))
    return created


def test_rocdecode_frames_are_the_software_frames_read_past_the_surface_pitch(
    fake_rocdecode: list[Any],
) -> None:
    """VCN surfaces are wider than the picture and padded below the luma: the NV12 tensor
    holds the picture alone, copied before the surface goes back."""
    uri = str(asset("media", "people.mp4"))
    _, expected = read(uri)
    source, frames = read(uri, hwaccel="rocdecode", loop=False)
    assert len(frames) == len(expected) and len(fake_rocdecode) == 1
    assert all(isinstance(frame.i420(), DeviceNV12) for frame in frames)
    assert frames[0].i420().shape == (450 * 3 // 2, 800)
    assert [f.pts for f in frames] == [f.pts for f in expected]
    for index in (0, 1, 90, len(frames) - 1):
        assert np.array_equal(frames[index].yuv, expected[index].yuv), index
    assert source.stats()["decoder"] == "rocdecode"


def test_auto_takes_rocdecode_where_nvidias_library_is_missing(
    fake_rocdecode: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(asset("media", "people.mp4"))
    with caplog.at_level(logging.INFO, logger="vapipe.stages.source.hardware"):
        source, frames = read(uri, hwaccel="auto")
    assert isinstance(frames[5].i420(), DeviceNV12) and len(fake_rocdecode) == 1
    assert source.stats()["decoder"] == "rocdecode"
    assert any("decoding on rocdecode on cpu" in r.getMessage() for r in caplog.records)


def test_rocdecode_needs_a_rocm_build_of_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    with pytest.raises(nvdec.DeviceDecoderUnavailable, match="not a ROCm build"):
        rocdecode.rocm_device(torch, 0)
    monkeypatch.setattr(torch.version, "hip", "7.2.3", raising=False)
    with pytest.raises(nvdec.DeviceDecoderUnavailable, match="torch sees no CUDA GPU"):
        rocdecode.rocm_device(torch, 0)


def test_doctor_lists_the_gpu_decoders_and_which_auto_takes(
    fake_nvdec: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vapipe.cli import doctor

    monkeypatch.setitem(sys.modules, "pyRocVideoDecode", None)
    lines: list[str] = []
    doctor._device_decoders(lines.append)
    assert lines[1:] == [
        "  nvdec: nvdec on cpu (PyNvVideoCodec fake); 8-bit 4:2:0 h264 up to 4096x4096, hevc "
        "up to 8192x8192",
        "  rocdecode: not here (pyRocVideoDecode is not installed (ROCm's rocpydecode package))",
        '  hwaccel = "auto" decodes on: nvdec',
    ]
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    lines.clear()
    doctor._device_decoders(lines.append)
    assert lines[-1] == '  hwaccel = "auto" decodes on: the CPU (software)'
