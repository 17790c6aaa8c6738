"""Recordings survive what kills processes, keep their frames' own timing, and rotate."""

from __future__ import annotations

import signal
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.e2e.helpers import FILE_CONFIG, cli, probe_video, read_lines, spawn, wait_for


@pytest.mark.parametrize(
    ("after_frames", "realtime"), [(72, True), (150, True), (300, True), (150, False)]
)
def test_sigkill_leaves_a_playable_fragmented_recording(
    tmp_path: Path, after_frames: int, realtime: bool
) -> None:
    # A camera-like run (realtime, looped), or a file read as fast as it goes, killed
    # outright: no drain, no trailer.
    pipeline = spawn(
        str(FILE_CONFIG), "--set", f"cam.realtime={str(realtime).lower()}",
        "--set", "cam.loop=true", cwd=tmp_path,
    )  # fmt: skip
    events = tmp_path / "out/events.jsonl"
    wait_for(lambda: len(read_lines(events)) >= after_frames, 120, f"{after_frames} frames")
    pipeline.send_signal(signal.SIGKILL)
    pipeline.wait(10)
    lines = read_lines(events)
    assert not (tmp_path / "out/annotated.mp4").exists(), "a half-written file has the final name"
    partial = tmp_path / "out/annotated.partial.mp4"
    video = probe_video(partial)
    rate = 24000 / 1001
    # At most the last fragment (2 s keyframe interval) and the frames in flight are lost.
    assert video["frames"] >= len(lines) - 2 * rate - 16, (video["frames"], len(lines))
    assert video["duration"] >= len(lines) / rate - 2.0 - 16 / rate


def mp4_boxes(path: Path) -> list[bytes]:
    """The top-level box types of an MP4, in file order."""
    data, at, boxes = path.read_bytes(), 0, []
    while at + 8 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        boxes.append(data[at + 4 : at + 8])
        if size == 1:
            size = int.from_bytes(data[at + 8 : at + 16], "big")
        if size < 8:
            break
        at += size
    return boxes


@pytest.mark.parametrize(("fragmented", "final"), [(None, "plain"), (True, "fragmented")])
def test_videos_are_fragmented_while_written_and_complete_under_their_name(
    tmp_path: Path, fragmented: bool | None, final: str
) -> None:
    args = ["--set", "cam.loop=true", "--set", "cam.realtime=true"]
    if fragmented is not None:
        args += ["--set", f"video.fragmented={str(fragmented).lower()}"]
    pipeline = spawn(str(FILE_CONFIG), *args, cwd=tmp_path)
    partial = tmp_path / "out/annotated.partial.mp4"
    events = tmp_path / "out/events.jsonl"
    wait_for(lambda: len(read_lines(events)) >= 72, 60, "frames past the first fragment")
    assert not (tmp_path / "out/annotated.mp4").exists()
    assert b"moof" in mp4_boxes(partial), "the file being written is not crash-safe"
    pipeline.send_signal(signal.SIGINT)
    pipeline.communicate(timeout=60)
    assert pipeline.returncode == 130
    assert not partial.exists() and not list((tmp_path / "out").glob("*.partial*"))
    done = tmp_path / "out/annotated.mp4"
    boxes = mp4_boxes(done)
    if final == "plain":  # the index up front, no fragments: what every player and editor takes
        assert b"moof" not in boxes and boxes.index(b"moov") < boxes.index(b"mdat"), boxes
    else:
        assert b"moof" in boxes
    assert probe_video(done)["frames"] == len(read_lines(events))


def vfr_clip(path: Path) -> list[float]:
    """60 frames at 50 fps, then 40 at 12.5 fps: 1.2 s + 3.2 s."""
    times = [i * 0.02 for i in range(60)] + [1.2 + i * 0.08 for i in range(40)]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 1000)
        for index, when in enumerate(times):
            frame = av.VideoFrame.from_ndarray(
                np.full((120, 160, 3), index * 2, np.uint8), format="bgr24"
            )
            frame.pts, frame.time_base = round(when * 1000), Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return times


def test_variable_frame_rate_timing_is_kept(tmp_path: Path) -> None:
    times = vfr_clip(tmp_path / "vfr.mp4")
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={tmp_path / 'vfr.mp4'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    with av.open(str(tmp_path / "out/annotated.mp4")) as container:
        got = [float(f.pts * f.time_base) for f in container.decode(video=0)]
    assert len(got) == len(times)
    start = got[0]
    assert max(abs((g - start) - t) for g, t in zip(got, times, strict=True)) < 0.002, got[-3:]


def test_segments_rotate_and_the_oldest_are_removed(tmp_path: Path) -> None:
    result = cli(
        str(FILE_CONFIG), "--set", "video.segment_s=4", "--set", "video.max_segments=2",
        "--set", "video.keyframe_s=1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "out").glob("annotated*.mp4"))
    # people.mp4 lasts 19.2 s: five segments of 4 s, the newest two kept.
    assert files == ["annotated-00004.mp4", "annotated-00005.mp4"], files
    first = probe_video(tmp_path / "out" / files[0])
    assert first["frames"] == pytest.approx(4 * 24000 / 1001, abs=2)
    assert first["duration"] == pytest.approx(4.0, abs=0.1)
    total = sum(probe_video(tmp_path / "out" / name)["frames"] for name in files)
    assert total == 460 - 3 * first["frames"]
    time.sleep(0)  # the run is over; nothing left behind under a temporary name:
    assert not list((tmp_path / "out").glob("*.partial.*"))


@pytest.mark.parametrize(("rotation", "corner"), [(90, "bottom-left"), (-90, "top-right")])
def test_rotation_metadata_turns_frames_upright(tmp_path: Path, rotation: int, corner: str) -> None:
    clip = tmp_path / "phone.mp4"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        stream.set_display_rotation(rotation)  # degrees counterclockwise
        for _ in range(5):
            image = np.zeros((96, 160, 3), np.uint8)
            image[:24, :40] = 255  # a white block in the stored picture's top-left corner
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={clip}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    with av.open(str(tmp_path / "out/annotated.mp4")) as container:
        frame = next(container.decode(video=0)).to_ndarray(format="bgr24")
    assert frame.shape[:2] == (160, 96), "not turned upright"
    # Turned 90 degrees counterclockwise, the top-left block goes to the bottom left.
    block = frame[-30:, :20] if corner == "bottom-left" else frame[:30, -20:]
    assert block.mean() > 200, f"the block is not in the {corner} corner"
