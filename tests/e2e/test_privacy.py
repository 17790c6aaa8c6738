"""configs/faces.toml with its redact node and every kind of picture output at once (the
annotated video, snapshots and their crops, clips, the live RTSP stream, Home Assistant's
camera on a real Mosquitto), on footage with faces: no face the graph found and no masked
area keeps its original pixels in any of them, while the frame events (taken before the
redact node) are those of the same graph without it.

The bound, per region (a face's box shrunk by a fifth on each side, leaving out the pixels
where the same graph without redaction draws boxes and labels): its mean absolute difference
to the same region of the decoded input, per pixel and channel (0-255), must be above
BOUND = 8. Counted are the regions with detail to hide (mean |region - its Gaussian blur,
sigma 2| of at least DETAIL = 5; a smooth back of a head that YuNet took for a face has less,
and a blur changes little there). Measured on this footage (the annotated video, 275 such
regions): encoding alone (x264, crf 23) moves unredacted faces by at most 6.0, the blurred
ones by 10.9 or more. A flat control region that nothing hides stays under the bound (1-2)."""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest

from tests.e2e.faces_footage import HEIGHT, WIDTH, make_faces_footage
from tests.e2e.helpers import REPO, cli, read_events, spawn, wait_for
from tests.e2e.mqtt import Topics, broker
from vapipe.stages.sinks.snapshots import SnapshotsConfig, crop_window

FACES = REPO / "configs" / "faces.toml"
BOUND = 8.0
DETAIL = 5.0
AREA = (200, 200, 300, 280)  # a fixed area masked on every frame (x1, y1, x2, y2)
CONTROL = (860, 380, 940, 460)  # background nothing hides and nothing is drawn on
Box = tuple[float, float, float, float]


def private_config(folder: Path, broker_port: int) -> Path:
    """faces.toml, its redact node masking AREA too, and after it: a line below the faces
    (for events that make snapshots and clips: a zone would tint the faces it covers),
    snapshots, clips, a live stream and Home Assistant's camera."""
    text = FACES.read_text(encoding="utf-8")
    old = '"cam ! pre ! det ! nms ! track ! face ! faceid ! redact ! video"'
    assert old in text, "configs/faces.toml's links changed: update this test"
    text = text.replace(
        old,
        '"cam ! pre ! det ! nms ! track ! face ! faceid ! redact ! zone ! snaps ! clips ! live '
        '! mq ! video ! after"',
    )
    text = text.replace(
        'method = "blur"              # or "pixelate", "fill"',
        'method = "blur"\nareas = [{ polygon = [[200, 200], [300, 200], [300, 280], [200, 280]] }]',
    )
    assert "areas = [" in text
    return write(
        folder / "private.toml",
        text
        + f"""
[nodes.zone]
type = "analytics"
lines = [{{ name = "door", start = [130, 250], end = [130, 470] }}]
min_crossing_depth = 0.02
min_crossing_px = 4

[nodes.snaps]
type = "snapshots"
event_types = ["line_cross"]

[nodes.clips]
type = "clips"
event_types = ["line_cross"]
pre_s = 0.5
post_s = 1.0

[nodes.live]
type = "live"
rtsp_port = 0

[nodes.mq]
type = "mqtt"
port = {broker_port}
event_types = ["line_cross"]
home_assistant = {{ camera_s = 0.5, camera_width = 960, snapshot_dir = "" }}

[nodes.after]
type = "events"
path = "out/after.jsonl"
""",
    )


def plain_config(folder: Path) -> Path:
    """faces.toml without its redact node: the graph whose events must be the same."""
    text = FACES.read_text(encoding="utf-8").replace("faceid ! redact ! video", "faceid ! video")
    start, end = text.index("[nodes.redact]"), text.index("[nodes.video]")
    return write(folder / "plain.toml", text[:start] + text[end:])


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def decoded(path: Path | bytes) -> list[np.ndarray]:
    source = io.BytesIO(path) if isinstance(path, bytes) else str(path)
    with av.open(source) as container:
        return [frame.to_ndarray(format="bgr24") for frame in container.decode(video=0)]


def drawn(plain: np.ndarray, original: np.ndarray) -> np.ndarray:
    """Where the graph draws (boxes, labels, trails: what the unredacted graph changed far),
    a little grown: left out of every region compared."""
    change = np.abs(plain.astype(int) - original.astype(int)).max(axis=2)
    return cv2.dilate((change > 40).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0


def window(box: Box, inset: float) -> tuple[slice, slice]:
    x1, y1, x2, y2 = box
    dx, dy = (x2 - x1) * inset, (y2 - y1) * inset
    return slice(round(y1 + dy), round(y2 - dy)), slice(round(x1 + dx), round(x2 - dx))


def difference(
    picture: np.ndarray, original: np.ndarray, box: Box, mask: np.ndarray, inset: float = 0.2
) -> float | None:
    """Mean |picture - original| inside ``box`` shrunk by ``inset`` of its size on each side,
    where nothing is drawn; None where too little is left."""
    rows, cols = window(box, inset)
    keep = ~mask[rows, cols]
    if keep.sum() < 20:
        return None
    change = np.abs(picture[rows, cols].astype(int) - original[rows, cols].astype(int))
    return float(change.mean(axis=2)[keep].mean())


def detail(original: np.ndarray, box: Box, mask: np.ndarray, inset: float = 0.2) -> float:
    """How much there is to hide: mean |region - its Gaussian blur (sigma 2)| where nothing
    is drawn (0 where too little is left)."""
    rows, cols = window(box, inset)
    region = original[rows, cols].astype(np.float32)
    keep = ~mask[rows, cols]
    if region.size == 0 or keep.sum() < 20:
        return 0.0
    fine = np.abs(region - cv2.GaussianBlur(region, (0, 0), 2)).mean(axis=2)
    return float(fine[keep].mean())


def faces_by_seq(events: list[dict[str, Any]]) -> dict[int, list[Box]]:
    found: dict[int, list[Box]] = {}
    for event in events:
        if event["event"] != "frame":
            continue
        for detection in event["detections"]:
            for inner in detection.get("attributes", {}).get("face", {}).get("boxes", []):
                found.setdefault(event["seq"], []).append(tuple(inner["xyxy"]))
    return found


def nearest(picture: np.ndarray, originals: list[np.ndarray]) -> int:
    """The seq of the original a picture shows (a live one's seq is not sent with it)."""
    small = cv2.resize(picture, (96, 48), interpolation=cv2.INTER_AREA).astype(int)
    costs = [
        np.abs(cv2.resize(o, (96, 48), interpolation=cv2.INTER_AREA).astype(int) - small).mean()
        for o in originals
    ]
    return int(np.argmin(costs))


def check(
    picture: np.ndarray, original: np.ndarray, mask: np.ndarray, faces: list[Box], what: str
) -> int:
    """The control region unchanged, the area and every face with detail to hide changed
    past BOUND; how many regions were checked."""
    control = difference(picture, original, CONTROL, mask, inset=0)
    assert control is not None and control < BOUND, f"{what}: control ({control})"
    checked = 0
    for box in [AREA, *faces]:
        if detail(original, box, mask) < DETAIL:
            continue
        change = difference(picture, original, box, mask)
        if change is not None:
            assert change > BOUND, f"{what}: face {box} kept ({change:.2f})"
            checked += 1
    return checked


class RtspGrab:
    """Pictures of the live RTSP stream, read by PyAV as any client would."""

    def __init__(self, url: str, wanted: int) -> None:
        self.pictures: list[np.ndarray] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, args=(url, wanted), daemon=True)
        self.thread.start()

    def _read(self, url: str, wanted: int) -> None:
        try:
            with av.open(url, options={"rtsp_transport": "tcp"}, timeout=30) as container:
                for frame in container.decode(video=0):
                    self.pictures.append(frame.to_ndarray(format="bgr24"))
                    if len(self.pictures) >= wanted:
                        return
        except av.FFmpegError as exc:
            self.error = str(exc)


@pytest.fixture(scope="module")
def footage(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    clip, gallery, _ = make_faces_footage(tmp_path_factory.mktemp("private"), frames=96)
    return clip, gallery


def test_no_picture_leaves_with_a_face_or_the_masked_area(
    footage: tuple[Path, Path], tmp_path: Path
) -> None:
    clip, gallery = footage
    originals = decoded(clip)
    # The same graph without redaction: its events to compare, its video to say where
    # boxes and labels are drawn.
    plain = cli(str(plain_config(tmp_path)), "--set", f"cam.uri={clip}", "--set",
                f"faceid.gallery={gallery}", "--set", "video.path=out/plain.mp4",
                "--set", "events.path=out/plain.jsonl", "--no-progress", cwd=tmp_path)  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-3000:]
    masks = [
        drawn(p, o) for p, o in zip(decoded(tmp_path / "out" / "plain.mp4"), originals, strict=True)
    ]
    with broker(tmp_path / "broker") as server:
        camera = Topics(server.port, "vapipe/+/camera")
        config = private_config(tmp_path, server.port)
        run = spawn(str(config), "--set", f"cam.uri={clip}", "--set", "cam.realtime=true",
                    "--set", f"faceid.gallery={gallery}", "--no-progress",
                    cwd=tmp_path)  # fmt: skip
        log: list[str] = []
        reader = threading.Thread(target=lambda: log.extend(run.stderr or ()), daemon=True)
        reader.start()
        wait_for(lambda: any("rtsp://" in line for line in log) or run.poll() is not None, 120,
                 "the live stream's address", log)  # fmt: skip
        url = re.search(r"rtsp://\S+", "".join(log))
        assert url, "".join(log[-20:])
        grab = RtspGrab(url.group(0), wanted=10)
        assert run.wait(240) == 0, "".join(log[-30:])
        grab.thread.join(60)
        pictures = camera.payloads("vapipe/cam/camera")
        camera.close()
    events = read_events(tmp_path / "out" / "faces.jsonl")
    faces = faces_by_seq(events)
    assert len(faces) > len(originals) // 2, "faces found on too few frames to tell"
    # what the events say is what the graph without the redact node says
    theirs = [e["detections"] for e in read_events(tmp_path / "out" / "plain.jsonl")
              if e["event"] == "frame"]  # fmt: skip
    assert [e["detections"] for e in events if e["event"] == "frame"] == theirs

    def checked(picture: np.ndarray, seq: int, what: str) -> int:
        return check(picture, originals[seq], masks[seq], faces.get(seq, []), what)

    # the annotated video: frame i is seq i
    video = decoded(tmp_path / "out" / "faces.mp4")
    assert len(video) == len(originals)
    assert sum(checked(picture, seq, f"video {seq}") for seq, picture in enumerate(video)) > 100

    # snapshots (and their crops) of the line's events, of the frame each names
    after = read_events(tmp_path / "out" / "after.jsonl")
    crossed = [e for e in after if e["event"] == "line_cross" and e.get("snapshot")]
    assert crossed, "no snapshot to check"
    media = tmp_path / "out" / "media"
    defaults = SnapshotsConfig()
    faces_in_crops = 0
    for event in crossed:
        seq = event.get("snapshot_seq", event["seq"])
        checked(cv2.imread(str(media / event["snapshot"])), seq, event["snapshot"])
        crop = cv2.imread(str(media / event["snapshot_crop"]))
        x1, y1, x2, y2 = crop_window(tuple(event["snapshot_box"]), WIDTH, HEIGHT,
                                     defaults.crop_min_px, defaults.crop_pad)  # fmt: skip
        assert crop.shape[:2] == (y2 - y1, x2 - x1)
        inside = [
            (fx1 - x1, fy1 - y1, fx2 - x1, fy2 - y1)
            for fx1, fy1, fx2, fy2 in faces.get(seq, [])
            if fx1 >= x1 and fy1 >= y1 and fx2 <= x2 and fy2 <= y2
        ]
        original, mask = originals[seq][y1:y2, x1:x2], masks[seq][y1:y2, x1:x2]
        for box in inside:
            change = difference(crop, original, box, np.zeros_like(mask))
            if detail(original, box, np.zeros_like(mask)) >= DETAIL and change is not None:
                assert change > BOUND, f"{event['snapshot_crop']}: face {box} ({change:.2f})"
                faces_in_crops += 1
    assert faces_in_crops

    # clips: encoded from the redacted frames (never copied from the source's packets)
    clipped = [e for e in after if e.get("clip")]
    assert clipped, "no clip to check"
    for event in clipped[:3]:
        first_pts = event["pts"] - event["clip_at_s"]
        with av.open(str(media / event["clip"])) as container:
            for frame in container.decode(video=0):
                seq = round((first_pts + float(frame.time or 0)) * 24)
                checked(frame.to_ndarray(format="bgr24"), seq, f"{event['clip']} {seq}")

    # the live stream, as an RTSP client gets it
    assert grab.error is None and len(grab.pictures) >= 5, grab.error
    for picture in grab.pictures:
        seq = nearest(picture, originals)
        checked(picture, seq, f"rtsp (seq {seq})")

    # Home Assistant's camera pictures (asked full size here: 960 wide)
    assert pictures, "no camera picture published"
    for jpeg in pictures:
        picture = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        seq = nearest(picture, originals)
        checked(picture, seq, f"camera picture (seq {seq})")
