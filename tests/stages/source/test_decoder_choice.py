"""The decoder choice's own rules, on stand-in packets, pictures and backends: a stream
starts in software and goes to the hardware on its first plain picture; a backend that cannot
open it, or fails later, hands the stream to software (which starts again at a keyframe); a
source asks for its backend once, on the GPU it names, and ``auto`` takes the first that
works, silently."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from vapipe.stages.source import hardware
from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.device_stream import DeviceDecoderUnavailable
from vapipe.stages.source.hardware import DecoderChoice, ProbingDecoder


class Picture:
    def __init__(self, name: str, rotation: int = 0) -> None:
        self.name, self.rotation = name, rotation
        self.format = type("Format", (), {"name": "yuv420p"})
        self.width, self.height, self.colorspace, self.color_range = 64, 48, 2, 1


class Packet:
    """Decodes in 'software' to the pictures it was given."""

    def __init__(self, index: int, keyframe: bool = False, pictures: int = 1, rotation: int = 0):
        self.index, self.is_keyframe, self.size = index, keyframe, 1
        self.pictures = [Picture(f"sw{index}.{n}", rotation if n == 0 else 0)
                         for n in range(pictures)]  # fmt: skip
        self.decoded = False

    def decode(self) -> list[Any]:
        self.decoded = True
        return self.pictures


class Device:
    def __init__(self, fail_at: int | None = None) -> None:
        self.fed: list[int] = []
        self.fail_at = fail_at

    def decode(self, packet: Packet) -> list[str]:
        if packet.index == self.fail_at:
            raise RuntimeError("engine fault")
        self.fed.append(packet.index)
        return [f"hw{packet.index}"]

    def restart(self, video: Any) -> bool:
        return True


class Backend:
    name = "fakedec"

    def __init__(self, device: Device | None = None, opens: bool = True) -> None:
        self.device = device or Device()
        self.opens = opens
        self.opened = 0

    def describe(self) -> str:
        return "fakedec"

    def takes(self) -> str:
        return "all"

    def refuses(self, video: Any) -> str | None:
        return None

    def open(self, video: Any) -> Device:
        if not self.opens:
            raise DeviceDecoderUnavailable("no engine free")
        self.opened += 1
        return self.device


def probing(backend: Backend, refusals: list[str]) -> ProbingDecoder:
    video = type(
        "Video", (), {"codec_context": type("Context", (), {"flush_buffers": lambda: None})}
    )
    return ProbingDecoder(backend, video, True, refusals.append)


def test_packets_before_the_first_picture_are_decoded_again_on_the_device() -> None:
    refusals: list[str] = []
    backend = Backend()
    decoder = probing(backend, refusals)
    first = Packet(0, keyframe=True, pictures=0)
    assert decoder.decode(first) == [] and first.decoded
    assert decoder.decode(Packet(1)) == ["hw0", "hw1"]  # the software picture is dropped
    later = Packet(2)
    assert decoder.decode(later) == ["hw2"] and not later.decoded
    assert backend.device.fed == [0, 1, 2] and not refusals and decoder.on_device


def test_a_first_picture_the_software_path_would_convert_keeps_the_stream_in_software() -> None:
    """Only the first picture of the first packet that gives any is asked (a rotated one)."""
    refusals: list[str] = []
    decoder = probing(Backend(), refusals)
    pictures = decoder.decode(Packet(0, keyframe=True, pictures=2, rotation=90))
    assert [p.name for p in pictures] == ["sw0.0", "sw0.1"]
    assert [p.name for p in decoder.decode(Packet(1))] == ["sw1.0"]
    assert len(refusals) == 1 and "not plain 4:2:0" in refusals[0] and not decoder.on_device


def test_a_backend_that_cannot_open_the_stream_leaves_it_in_software() -> None:
    refusals: list[str] = []
    decoder = probing(Backend(opens=False), refusals)
    assert [p.name for p in decoder.decode(Packet(0, keyframe=True))] == ["sw0.0"]
    assert [p.name for p in decoder.decode(Packet(1))] == ["sw1.0"]
    assert refusals == ["no engine free"]


def test_after_a_fault_software_starts_again_at_the_next_keyframe() -> None:
    refusals: list[str] = []
    decoder = probing(Backend(Device(fail_at=3)), refusals)
    decoder.decode(Packet(0, keyframe=True))
    assert decoder.decode(Packet(2)) == ["hw2"]
    assert decoder.decode(Packet(3)) == []
    skipped = Packet(4)
    assert decoder.decode(skipped) == [] and not skipped.decoded
    assert [p.name for p in decoder.decode(Packet(5, keyframe=True))] == ["sw5.0"]
    assert [p.name for p in decoder.decode(Packet(6))] == ["sw6.0"]
    assert refusals == ["fakedec failed mid-stream (engine fault)"]


def test_a_source_asks_for_its_backend_once_on_the_gpu_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []

    def backend(gpu: int) -> Backend:
        made.append(gpu)
        return Backend()

    monkeypatch.setattr(hardware, "BACKENDS", {"nvdec": backend})
    choice = DecoderChoice("cam", SourceConfig(uri="a.mp4", hwaccel="nvdec", hwaccel_device="1"))
    video = object()
    for _ in range(3):
        assert isinstance(choice.for_session(video), ProbingDecoder)
    assert made == [1]
    assert made == [1] and DecoderChoice("c", SourceConfig(uri="a.mp4", hwaccel="nvdec")).gpu == 0


def test_auto_takes_the_first_backend_that_works_without_a_word(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = Backend(), Backend()
    second.name = "second"

    def missing(gpu: int) -> Backend:
        raise DeviceDecoderUnavailable("not installed")

    monkeypatch.setattr(
        hardware, "BACKENDS", {"a": missing, "b": lambda g: first, "c": lambda g: second}
    )
    choice = DecoderChoice("cam", SourceConfig(uri="a.mp4", hwaccel="auto"))
    with caplog.at_level(logging.INFO, logger="vapipe.stages.source.hardware"):
        decoder = choice.for_session(object())
    assert isinstance(decoder, ProbingDecoder) and decoder.backend is first
    assert choice.refused is None
    assert not [r for r in caplog.records if "decoding in software" in r.getMessage()]


def test_the_pictures_go_to_the_gpu_torch_names() -> None:
    from vapipe.stages.source.device_stream import cuda_device

    class Cuda:
        @staticmethod
        def is_available() -> bool:
            return True

        @staticmethod
        def device_count() -> int:
            return 2

    torch = type("Torch", (), {"cuda": Cuda, "device": lambda kind, index: (kind, index)})
    assert cuda_device(torch, 0) == ("cuda", 0) and cuda_device(torch, 1) == ("cuda", 1)
    with pytest.raises(DeviceDecoderUnavailable, match=r"no GPU 2 \(torch sees 2\)"):
        cuda_device(torch, 2)


def test_a_stream_without_timestamps_gives_pictures_without_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A raw H.264 stream's packets carry no pts: the decoder is handed NO_PTS and the
    pictures come back with none, timed by the source's timeline as in software."""
    import sys

    import av
    import numpy as np

    from tests.fakes import pynvvideocodec
    from vapipe.pipeline.stage import StageContext
    from vapipe.stages.source import nvdec
    from vapipe.stages.source.stage import VideoSource

    pytest.importorskip("torch")
    path = tmp_path / "raw.h264"
    with av.open(str(path), "w", format="h264") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(10):
            image = np.full((48, 64, 3), index * 20, np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        out.mux(stream.encode(None))
    created: list[Any] = []
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module(created=created))
    monkeypatch.setattr(nvdec, "cuda_device", lambda torch, gpu: torch.device("cpu"))
    runs = {}
    for hwaccel in (None, "nvdec"):
        source = VideoSource("cam", SourceConfig(uri=str(path), hwaccel=hwaccel))
        source.open(StageContext("cam"))
        runs[hwaccel] = list(source.frames())
    assert [f.i420().pts for f in runs["nvdec"]] == [None] * 10
    assert [f.pts for f in runs["nvdec"]] == [f.pts for f in runs[None]]
    assert len(created) == 1


def test_a_drained_stream_decodes_nothing_more_and_restarts_only_for_its_codec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    import av

    from tests.conftest import asset
    from tests.fakes import pynvvideocodec
    from vapipe.stages.source import nvdec

    pytest.importorskip("torch")
    created: list[Any] = []
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", pynvvideocodec.module(created=created))
    monkeypatch.setattr(nvdec, "cuda_device", lambda torch, gpu: torch.device("cpu"))
    with av.open(str(asset("media", "people.mp4"))) as container:
        video = container.streams.video[0]
        decoder = nvdec.NvdecBackend(0).open(video)
        pictures = [p for packet in container.demux(video) for p in decoder.decode(packet)]
        assert len(pictures) == video.frames
        fed = created[0].packets
        assert decoder.decode(av.Packet(b"")) == [] and created[0].packets == fed
        other = type("Stream", (), {"codec_context": type("C", (), {"name": "av1"})})
        assert not decoder.restart(other)
        assert decoder.restart(video) and not decoder.ended
