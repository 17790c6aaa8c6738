"""``codec = "auto"``: a hardware H.264 encoder where one opens, else libx264, said in the
log; each encoder gets its own names for quality."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.helpers import cli, probe_video
from vapipe.stages.media import encoder
from vapipe.stages.media.encoder import Encoding, choose_codec, codec_options, open_error

REPO = Path(__file__).resolve().parents[3]


def test_auto_takes_the_first_hardware_encoder_that_opens(monkeypatch) -> None:
    opened = {"h264_amf"}

    def fake(codec: str) -> str | None:
        return None if codec in opened else "cannot be opened here: no device"

    monkeypatch.setattr(encoder, "open_error", fake)
    assert choose_codec("auto")[0] == "h264_amf"
    opened.add("h264_nvenc")
    assert choose_codec("auto")[0] == "h264_nvenc"
    opened.clear()
    codec, why = choose_codec("auto")
    assert codec == "libx264" and "h264_nvenc: cannot be opened here" in why
    assert choose_codec("libx265") == ("libx265", "configured")


def test_quality_goes_by_each_encoders_own_names() -> None:
    def options(codec: str, bitrate: int | None = None) -> dict:
        return codec_options(Encoding(codec, "veryfast", 20, bitrate, None, 1.0))

    assert options("libx264") == {"preset": "veryfast", "crf": "20"}
    assert options("h264_nvenc") == {"rc": "vbr", "cq": "20"}
    assert options("h264_amf") == {"rc": "cqp", "qp_i": "20", "qp_p": "20"}
    assert options("libx264", bitrate=2_000_000) == {"preset": "veryfast"}
    assert options("h264_nvenc", bitrate=2_000_000) == {}


def test_open_error_says_why() -> None:
    assert open_error("libx264") is None
    assert (open_error("nonesuch") or "").startswith("is not in this FFmpeg")
    assert open_error("aac") == "is not a video encoder (audio)"


def test_auto_records_with_what_opens_here_and_says_so(tmp_path: Path) -> None:
    result = cli(str(REPO / "configs" / "file.toml"), "--max-frames", "8",
                 "--set", "video.codec='auto'", "--set", "video.path='out/auto.mp4'",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    hardware = [c for c in encoder.HARDWARE_H264 if open_error(c) is None]
    chosen = hardware[0] if hardware else "libx264"
    assert f"video: encoder {chosen} (auto:" in result.stderr
    assert probe_video(tmp_path / "out" / "auto.mp4")["frames"] == 8
