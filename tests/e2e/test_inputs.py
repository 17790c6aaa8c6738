"""Awkward inputs and outputs through the real CLI: damaged files, no video stream, odd frame
sizes, several sources into one file, per-source outputs of configs/multi.toml."""

from __future__ import annotations

import json
import random
from pathlib import Path

import av
import av.codec.hwaccel
import numpy as np
import pytest

from tests.e2e.helpers import FILE_CONFIG, REPO, cli, make_clip, probe_video, read_events


def test_garbage_mid_file_is_skipped_and_the_run_goes_on(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "clip.ts", 60)
    data = bytearray(clip.read_bytes())
    rng = random.Random(1)
    # Overwrite the payload (not the 4-byte headers) of half the 188-byte transport-stream
    # packets in the middle third: the demuxer keeps going, the decoder meets garbage.
    for start in range(len(data) // 3, 2 * len(data) // 3, 188):
        if rng.random() < 0.5:
            data[start + 4 : start + 188] = bytes(rng.randrange(256) for _ in range(184))
    damaged = tmp_path / "damaged.ts"
    damaged.write_bytes(bytes(data))
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={damaged}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    events = read_events(tmp_path / "out/events.jsonl")
    assert 20 <= len(events) < 60, f"{len(events)} frames from a clip with its middle destroyed"
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert probe_video(tmp_path / "out/annotated.mp4")["frames"] == len(events)


def test_a_file_without_video_is_one_line_error(tmp_path: Path) -> None:
    audio = tmp_path / "tone.wav"
    with av.open(str(audio), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        samples = (np.sin(np.arange(8000) / 5) * 3000).astype(np.int16)[None]
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={audio}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: stage 'cam': {audio} has no video stream"
    )


def test_odd_frame_sizes_run_and_the_video_keeps_even_dimensions(tmp_path: Path) -> None:
    clip = tmp_path / "odd.mkv"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("ffv1", rate=25)  # lossless, any size, odd ones too
        stream.width, stream.height, stream.pix_fmt = 161, 97, "bgr0"
        for index in range(10):
            image = np.full((97, 161, 3), 40 + index, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    result = cli(str(FILE_CONFIG), "--set", f"cam.uri={clip}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(read_events(tmp_path / "out/events.jsonl")) == 10
    video = probe_video(tmp_path / "out/annotated.mp4")
    assert (video["frames"], video["width"], video["height"]) == (10, 160, 96)


TWO_INTO_ONE = """\
links = ["a ! pre", "b ! pre", "pre ! det ! nms ! video"]
[nodes.a]
type = "source"
uri = "{clip}"
[nodes.b]
type = "source"
uri = "{clip}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
[nodes.video]
type = "video"
path = "{path}"
"""


def test_several_sources_need_source_id_in_the_video_path(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "clip.mp4", 12)
    config = tmp_path / "two.toml"
    config.write_text(TWO_INTO_ONE.format(clip=clip, path="out/all.mp4"))
    result = cli(str(config), cwd=tmp_path)
    # A config error before anything opens: no half-written output, no decoded frame wasted.
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {config}:17: node 'video' key 'path': 2 sources would write to out/all.mp4: "
        "put {source_id} in path (e.g. out/{source_id}.mp4)"
    )
    assert not (tmp_path / "out").exists()
    config.write_text(TWO_INTO_ONE.format(clip=clip, path="out/{source_id}.mp4"))
    result = cli(str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    for source in ("a", "b"):
        assert probe_video(tmp_path / "out" / f"{source}.mp4")["frames"] == 12


def test_multi_config_writes_one_video_per_camera(tmp_path: Path) -> None:
    result = cli(
        str(REPO / "configs" / "multi.toml"), "--max-frames", "30", "--stats", "s.json",
        cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "out/multi/events.jsonl")
    sizes = {"cam1": (800, 450), "cam2": (640, 360), "cam3": (720, 480)}
    for source, (width, height) in sizes.items():
        frames = [e for e in events if e["event"] == "frame" and e["source_id"] == source]
        video = probe_video(tmp_path / "out" / "multi" / f"{source}.mp4")
        assert (video["width"], video["height"]) == (width, height), source
        # Live-style leaky queues may drop frames, but the video holds exactly the frames
        # that reached the sinks, in order.
        assert 0 < video["frames"] == len(frames), source
        seqs = [e["seq"] for e in frames]
        assert seqs == sorted(set(seqs)), source


def test_a_still_image_gives_an_annotated_image(tmp_path: Path) -> None:
    import cv2

    result = cli(
        str(FILE_CONFIG), "--set", "cam.uri=sample:dog", "--set", "video.path=out/dog.jpg",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    from tests.conftest import asset

    drawn = cv2.imread(str(tmp_path / "out/dog.jpg"))
    original = cv2.imread(str(asset("media", "dog.jpg")))
    assert drawn is not None and drawn.shape == original.shape
    # Boxes were drawn: many pixels changed, far more than JPEG re-encoding alone changes.
    changed = (np.abs(drawn.astype(int) - original.astype(int)).max(axis=2) > 60).mean()
    assert changed > 0.005, changed
    assert not list((tmp_path / "out").glob("*.partial.*"))


def test_frames_as_numbered_images(tmp_path: Path) -> None:
    result = cli(
        str(FILE_CONFIG), "--max-frames", "3", "--set", "video.path=out/frame-{seq}.png",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    names = sorted(p.name for p in (tmp_path / "out").glob("frame-*.png"))
    assert names == ["frame-0.png", "frame-1.png", "frame-2.png"]


@pytest.mark.parametrize("pattern", ["{folder}", "{folder}/*.jpg"])
def test_a_folder_or_glob_of_images_is_a_source(tmp_path: Path, pattern: str) -> None:
    import shutil

    import cv2

    from tests.conftest import asset

    folder = tmp_path / "photos"
    folder.mkdir()
    dog = cv2.imread(str(asset("media", "dog.jpg")))
    shutil.copy(asset("media", "dog.jpg"), folder / "b.jpg")
    cv2.imwrite(str(folder / "a.jpg"), cv2.flip(dog, 1))  # mirrored: the dog on the right
    cv2.imwrite(str(folder / "c.jpg"), cv2.resize(dog, (384, 288)))  # another size
    (folder / "notes.txt").write_text("not a picture")
    uri = pattern.format(folder=folder)
    result = cli(
        str(FILE_CONFIG), "--set", f"cam.uri={uri}", "--set", "video.path=out/{seq}.jpg",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "out/events.jsonl")
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert [e["pts"] for e in events] == [0.0, 1.0, 2.0]
    dogs = [[d for d in e["detections"] if d["class_name"] == "dog"] for e in events]
    assert all(len(d) == 1 for d in dogs), "each picture shows the dog once"
    assert dogs[0][0]["xyxy"][0] > 384 > dogs[1][0]["xyxy"][2], "name order or mirroring lost"
    assert dogs[2][0]["xyxy"][2] <= 384, "the small picture's boxes are in its own pixels"
    assert sorted(p.name for p in (tmp_path / "out").glob("*.jpg")) == ["0.jpg", "1.jpg", "2.jpg"]


def test_hwaccel_without_the_device_decodes_in_software_with_a_warning(tmp_path: Path) -> None:
    available = av.codec.hwaccel.hwdevices_available()
    if not available:
        pytest.skip("this FFmpeg build has no hardware device types")
    runs = {}
    for name, extra in {"plain": [], "hw": ["--set", f"cam.hwaccel={available[0]}"]}.items():
        out = tmp_path / f"{name}.jsonl"
        result = cli(
            str(FILE_CONFIG), *extra, "--set", f"events.path={out}", "--max-frames", "8",
            "--stats", str(tmp_path / f"{name}.json"), cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        runs[name] = ([e["detections"] for e in read_events(out)], result.stderr)
    assert runs["hw"][0] == runs["plain"][0] and len(runs["hw"][0]) == 8
    stats = json.loads((tmp_path / "hw.json").read_text())
    if stats["stages"]["cam"]["decoder"] == "software":  # no such GPU here: said, not failed
        assert f"hwaccel {available[0]} cannot be used here" in runs["hw"][1]


def test_an_unknown_hwaccel_is_a_config_error_listing_the_known_ones(tmp_path: Path) -> None:
    result = cli(str(FILE_CONFIG), "--set", "cam.hwaccel=nvidia", cwd=tmp_path)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert (
        "key 'hwaccel': 'nvidia' is not auto, nvdec, rocdecode or a device type of this FFmpeg "
        "build; it has:" in last
    )
