"""Hostile input files: each run ends with the right exit code and one line that names the
file, never a traceback; what a damaged file still holds is delivered, and what it lacks is
counted and said."""

from __future__ import annotations

import random
from pathlib import Path

import av
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, cli, read_events

PEOPLE_FRAMES = 460


def run(tmp_path: Path, clip: Path, *extra: str):  # type: ignore[no-untyped-def]
    return cli(str(FILE_CONFIG), "--set", f"cam.uri={clip}", "--stats", "s.json", *extra,
               cwd=tmp_path)  # fmt: skip


def remux(source: Path, target: Path, faststart: bool) -> None:
    """The same packets in a new MP4, with the index (moov) at the start or at the end."""
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(source)) as inp, av.open(str(target), "w", options=options) as out:
        video = inp.streams.video[0]
        stream = out.add_stream_from_template(video)
        for packet in inp.demux(video):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        pytest.param("empty.mp4", b"", "cannot open {clip}: ", id="zero-bytes"),
        pytest.param(
            "noise.mp4", random.Random(3).randbytes(50_000), "cannot open {clip}: ", id="random"
        ),
        pytest.param(
            "photo.jpg",
            b"this is not a JPEG\n" * 20,
            "{clip}: no frame could be decoded (1 corrupt packets)",
            id="not-an-image",
        ),
    ],
)
def test_unreadable_files_fail_with_one_line(
    tmp_path: Path, name: str, content: bytes, why: str
) -> None:
    clip = tmp_path / name
    clip.write_bytes(content)
    result = run(tmp_path, clip)
    assert result.returncode == 1, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: stage 'cam'") and why.format(clip=clip) in last, last
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("cut", [0.3, 0.7])
def test_truncated_with_the_index_at_the_end_cannot_open(tmp_path: Path, cut: float) -> None:
    whole = tmp_path / "whole.mp4"
    remux(asset("media", "people.mp4"), whole, faststart=False)
    data = whole.read_bytes()
    clip = tmp_path / "cut.mp4"
    clip.write_bytes(data[: int(len(data) * cut)])
    result = run(tmp_path, clip)
    assert result.returncode == 1
    assert f"cannot open {clip}" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.9])
def test_truncated_with_the_index_first_delivers_what_is_there_and_says_so(
    tmp_path: Path, cut: float
) -> None:
    whole = tmp_path / "whole.mp4"
    remux(asset("media", "people.mp4"), whole, faststart=True)
    data = whole.read_bytes()
    clip = tmp_path / "cut.mp4"
    clip.write_bytes(data[: int(len(data) * cut)])
    result = run(tmp_path, clip)
    assert result.returncode == 0, result.stderr[-2000:]
    frames = len(read_events(tmp_path / "out/events.jsonl"))
    assert 0 < frames < PEOPLE_FRAMES
    # Roughly proportional to what is left (bitrate varies along the clip).
    assert abs(frames / PEOPLE_FRAMES - cut) < 0.2, frames
    assert (
        f"cam: {frames} of the {PEOPLE_FRAMES} frames {clip} announces were decoded"
        in result.stderr
    )


def test_a_file_with_no_decodable_frame_is_a_failure(tmp_path: Path) -> None:
    whole = tmp_path / "whole.mp4"
    remux(asset("media", "people.mp4"), whole, faststart=True)
    data = whole.read_bytes()
    clip = tmp_path / "header-only.mp4"
    clip.write_bytes(data[: data.index(b"mdat") + 200])  # the index, and 200 bytes of data
    result = run(tmp_path, clip)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"error: stage 'cam' (source 'cam'): {clip}: no frame could be decoded"
    ) or result.stderr.strip().splitlines()[-1].startswith(
        f"error: stage 'cam': {clip}: no frame could be decoded"
    )
    assert not (tmp_path / "out/annotated.mp4").exists()


def test_an_unsupported_codec_is_one_line(tmp_path: Path) -> None:
    from tests.e2e.helpers import make_clip

    clip = make_clip(tmp_path / "h264.mkv", 10)
    # The same file, its Matroska codec id replaced by one no decoder knows.
    unknown = tmp_path / "unknown.mkv"
    unknown.write_bytes(clip.read_bytes().replace(b"V_MPEG4/ISO/AVC", b"V_VAPIPE/NO/ONE"))
    result = run(tmp_path, unknown)
    assert result.returncode == 1, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: stage 'cam': {unknown}: its video codec cannot be decoded")
    assert "Traceback" not in result.stderr
