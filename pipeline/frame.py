"""The items that flow between stages."""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.geometry import Letterbox


@dataclass(frozen=True)
class StreamInfo:
    """What a source knows about its stream; shared by all frames of that stream."""

    source_id: str
    uri: str
    """Where the frames come from, credentials masked."""
    width: int
    height: int
    rate: Fraction | None
    """Frames per second (the container's average rate), None when unknown."""
    frame_count: int | None = None
    live: bool = False


class I420Planes(Protocol):
    """A decoded I420 picture still in its decoder's planes: ``yuv``'s array is made from it
    only when something reads it, and a device front end copies it straight into its staging
    memory instead (one copy of the picture, not two)."""

    shape: tuple[int, int]
    """The I420 array's shape: (height * 3 / 2, width)."""
    nbytes: int

    def to_array(self) -> np.ndarray:
        """The planes as one I420 array (a copy)."""
        ...

    def copy_into(self, out: np.ndarray) -> None:
        """Writes the picture into ``out`` (1-D uint8, ``nbytes`` long) as the I420 array."""
        ...

    def luma(self) -> np.ndarray:
        """The Y plane, (height, width) uint8, without copying it where it can."""
        ...


Picture = np.ndarray | I420Planes
"""What a device front end takes per frame: a BGR or I420 array, or an I420 picture still in
its decoder's planes (``Frame.i420``)."""


def contiguous(picture: Picture) -> Picture:
    """Arrays made C-contiguous (a copy only where they are not); planes as they are."""
    return np.ascontiguousarray(picture) if isinstance(picture, np.ndarray) else picture


def copy_picture(picture: Picture, out: np.ndarray) -> None:
    """Writes a contiguous array or decoder planes into ``out``, 1-D uint8 of their
    ``nbytes``."""
    if isinstance(picture, np.ndarray):
        out[...] = picture.ravel()
    else:
        picture.copy_into(out)


@dataclass(frozen=True)
class FrameAnalytics:
    """What an analytics node knew at one frame: counts and occupancy (a snapshot, for the
    frame event), and the source's lines and zones in pixels (for drawing)."""

    summary: dict[str, Any]
    lines: tuple[Any, ...]
    """The analytics' line objects (``stages.analytics.geometry.Line``)."""
    zones: tuple[Any, ...]
    """Its zone objects (``stages.analytics.geometry.Zone``)."""


@dataclass(frozen=True)
class Motion:
    """A motion node's finding on one frame."""

    still: bool
    """Nothing moved since the source's previous frame: the frame is ``predicted`` and the
    tracker holds its tracks where they were."""
    mask: np.ndarray | None = None
    """With ``show``: the changed pixels at the compared size (bool), None on a source's first
    frame or without ``show``."""
    shown: bool = False
    """The node keeps masks for the video and previews (``motion.show``)."""


@dataclass
class EventFiles:
    """The files media sinks wrote for one of a frame's events, which its record names."""

    snapshot: str | None = None
    """The event's picture, relative to the media folder."""
    snapshot_crop: str | None = None
    """The tracked object's crop of it."""
    snapshot_box: list[float] | None = None
    """Where the object is in the picture (frame pixels)."""
    snapshot_seq: int | None = None
    """The frame the picture is of (the object's best view in a short window)."""
    clip: str | None = None
    """The clip the event is in, relative to the media folder."""
    clip_at_s: float | None = None
    """Where in the clip the event happens."""

    def fields(self) -> dict[str, Any]:
        """The files written so far, as the record's keys."""
        return {key: value for key, value in vars(self).items() if value is not None}


@dataclass(eq=False)
class Frame:
    """One decoded picture and the metadata stages add to it on its way.

    ``image`` is HWC uint8 BGR. Stages add their results as the fields declared here
    (``tensor``, ``letterbox``, ``detections``, ``motion``...): what one stage hands another
    is a typed field, so a reader sees who writes what. When no
    stage after preprocessing reads pixels (``Stage.reads_pixels``), ``image`` keeps its
    shape but its pixels are gone (read-only zeros) once the model input is made.
    """

    source_id: str
    seq: int
    """Per source, from 0, counting on across reconnects."""
    pts: float
    """Presentation time in seconds, from the container."""
    capture_time: float
    """Wall-clock time (time.time()) when the frame left the decoder."""
    image: np.ndarray
    """HWC uint8 BGR (see ``yuv``)."""
    stream: StreamInfo
    tensor: np.ndarray | None = None
    """The model input for this frame (CHW), written by preprocess."""
    letterbox: Letterbox | None = None
    """How the image was mapped to the model input, to map boxes back."""
    detections: Detections | None = None
    """Candidates in model-input pixels after infer; detections in frame pixels after nms."""
    predicted: bool = False
    """The detector skipped this frame (``infer.interval``): after a track node, its
    detections are the tracks' predicted boxes; before one, it has none."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events this frame caused (``line_cross``, ``zone_enter``...), written after its
    ``frame`` event by the event sinks."""
    event_files: dict[int, EventFiles] = field(default_factory=dict)
    """Files media sinks wrote for some of ``events`` (by index there): each event's record
    names them (``files_of``)."""
    analytics: FrameAnalytics | None = None
    """Counts and occupancy at this frame, and the geometry to draw."""
    motion: Motion | None = None
    """What a motion node saw on this frame (set on every frame it passes)."""
    track_origins: dict[int, np.ndarray] | None = None
    """Track id -> the earliest box (xyxy, frame pixels) of the traced-back path of each track
    identified on this frame (``track.backtrace_s``), for lines the object crossed while the
    detector was unsure of it."""
    scheduled: bool = False
    """The preprocess node already asked the detection schedule (and flagged the frame
    ``predicted`` if it is not due): the infer node does not ask twice."""
    yuv: np.ndarray | None = None
    """The picture as decoded, I420 planes ``(height * 3 / 2, width)``, for plain 4:2:0
    pictures (limited-range BT.601 or untagged, even size, upright). ``image`` is then made
    from it on first use, with OpenCV's BT.601 conversion: the one colour conversion of every
    path (OpenCL preprocessing does the same arithmetic in its kernel)."""
    planes: InitVar[I420Planes | None] = None
    """Instead of ``yuv``: the decoder's planes, from which ``yuv`` is made on first read."""

    def __post_init__(self, planes: I420Planes | None) -> None:
        if planes is not None:
            self.__dict__["_planes"] = planes

    def files_of(self, index: int) -> EventFiles:
        """The files written for event ``index`` of ``events`` (a media sink adds its own)."""
        return self.event_files.setdefault(index, EventFiles())

    def i420(self) -> np.ndarray | I420Planes | None:
        """The I420 picture as held, without copying it: ``yuv``'s array once made, else the
        decoder's planes (for ``copy_picture``); None for a frame without one."""
        array = self.__dict__.get("_yuv")
        return array if array is not None else self.__dict__.get("_planes")

    def image_made(self) -> bool:
        """Whether ``image`` is there already (reading it costs no colour conversion)."""
        return self.__dict__.get("_image") is not None

    def luma(self) -> np.ndarray | None:
        """The decoded luma plane (height, width) without making ``yuv``'s array (a motion
        test reads only this); None for a frame without an I420 picture."""
        picture = self.i420()
        if isinstance(picture, np.ndarray):
            return picture[: picture.shape[0] * 2 // 3]
        return None if picture is None else picture.luma()

    @property
    def shape(self) -> tuple[int, int, int]:
        """``image.shape``, without making the image."""
        held = self.__dict__.get("_image")
        picture = self.i420()
        if held is None and picture is not None:
            return (picture.shape[0] * 2 // 3, picture.shape[1], 3)
        return _image(self).shape

    def __repr__(self) -> str:
        return f"Frame({self.source_id!r}, seq={self.seq}, pts={self.pts:.3f})"


def _image(frame: Frame) -> np.ndarray:
    image = frame.__dict__.get("_image")
    if image is None:
        if frame.yuv is None:
            raise AttributeError(f"{frame!r} carries no picture")
        import cv2  # only frames carrying YUV get here

        image = cv2.cvtColor(frame.yuv, cv2.COLOR_YUV2BGR_I420)
        frame.__dict__["_image"] = image
    return image


def _set_image(frame: Frame, image: np.ndarray | None) -> None:
    frame.__dict__["_image"] = image


def _yuv(frame: Frame) -> np.ndarray | None:
    array = frame.__dict__.get("_yuv")
    if array is None:
        planes = frame.__dict__.pop("_planes", None)
        if planes is not None:
            array = frame.__dict__["_yuv"] = planes.to_array()
    return array


def _set_yuv(frame: Frame, array: np.ndarray | None) -> None:
    frame.__dict__.pop("_planes", None)
    frame.__dict__["_yuv"] = array


# ``image`` is made from ``yuv``, and ``yuv`` from the decoder's planes, when first read (data
# descriptors, so the dataclass's own __init__ assignments go through them too).
# mypy reads the fields' annotations, not these properties; both say np.ndarray.
Frame.image = property(_image, _set_image)  # type: ignore[assignment]
# The same: yuv's annotation and this property's getter both say np.ndarray | None.
Frame.yuv = property(_yuv, _set_yuv)  # type: ignore[assignment]


@dataclass(frozen=True)
class Message:
    """An in-band event (``source_down``, ``source_up``, ...). It travels between the frames, in
    order, through every stage; stages pass it on unless they handle it (the events sink
    writes it)."""

    source_id: str
    kind: str
    time: float
    """Wall-clock time (time.time()) when it happened."""
    seq: int | None = None
    """The last frame's seq of that source, if any."""
    pts: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class EncodedStream:
    """One session (connection) of a source's video stream as encoded: what a remuxer needs
    to write its packets without decoding them."""

    session: int
    """Counts the source's sessions from 1; packets of two sessions never share a file."""
    holder: Any
    """The in-memory PyAV container that keeps ``template`` alive."""
    template: Any
    """A PyAV stream with the codec parameters (``add_stream_from_template``)."""
    time_base: Fraction


@dataclass(frozen=True, eq=False)
class EncodedPacket:
    """One demuxed video packet (``Stage.takes_packets``)."""

    data: bytes
    pts: int
    """Container pts, in ``stream.time_base`` (dts where the container gave no pts)."""
    dts: int
    keyframe: bool
    time: float
    """Its presentation time on the frames' ``pts`` line (seconds)."""
    stream: EncodedStream


def in_order(items: list[Any]) -> list[Any]:
    """A batch as it came: each in-band message alone, and the data items between two as one
    list (so a sink writes a source's ``source_down`` after that source's last frame)."""
    runs: list[Any] = []
    data: list[Any] = []
    for item in items:
        if isinstance(item, Message):
            if data:
                runs.append(data)
                data = []
            runs.append(item)
        else:
            data.append(item)
    if data:
        runs.append(data)
    return runs
