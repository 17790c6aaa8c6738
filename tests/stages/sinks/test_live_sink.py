"""The live node with its real RTSP server (GStreamer's, in a child process of the system
Python): each source is a mount; a stream added while it runs (a service's new camera) gets
its own mount at once; a client of one mount sees that source's pictures; a login is asked
for when set; a port already taken stops the node at once, saying so."""

from __future__ import annotations

import socket
import threading
import time
from fractions import Fraction

import av
import numpy as np
import pytest

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.sinks.live import LiveConfig, LiveSink


def frame(source_id: str, index: int, level: int) -> Frame:
    image = np.full((96, 128, 3), level, np.uint8)
    image[20:40, (index * 3) % 100 : (index * 3) % 100 + 20] = 255 - level
    info = StreamInfo(source_id, "x", 128, 96, Fraction(25))
    return Frame(source_id, index, index / 25, time.time(), image, info)


class Feeder:
    """Frames of two sources into the node until stopped, as a pipeline would."""

    def __init__(self, node: LiveSink) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(node,), daemon=True)
        self.thread.start()

    def _run(self, node: LiveSink) -> None:
        index = 0
        while not self.stop.is_set():
            node.process(frame("cam", index, 40))
            node.process(frame("door", index, 200))  # not a source the node opened with
            index += 1
            time.sleep(0.02)


def play(url: str, count: int = 3) -> list[np.ndarray]:
    options = {"rtsp_transport": "tcp", "fflags": "nobuffer"}
    # (a generous timeout: on a loaded 2-core machine the first keyframe can take a while)
    with av.open(url, options=options, timeout=120) as container:
        pictures = []
        for picture in container.decode(video=0):
            pictures.append(picture.to_ndarray(format="bgr24"))
            if len(pictures) == count:
                return pictures
    return pictures


def test_each_source_and_each_added_stream_is_a_mount_of_its_own() -> None:
    node = LiveSink("live", LiveConfig(rtsp_port=0, draw=False, fps=25))
    node.open(StageContext("live", source_ids=["cam"]))
    feeder = Feeder(node)
    try:
        assert node.server is not None
        port = node.server.port
        cam = play(f"rtsp://127.0.0.1:{port}/cam")
        door = play(f"rtsp://127.0.0.1:{port}/door")
        assert abs(float(cam[-1][80:].mean()) - 40) < 8  # the dark source
        assert abs(float(door[-1][80:].mean()) - 200) < 8  # the bright one, added later
        stats = node.stats()
        assert stats["cam"]["encoded"] > 0 and stats["door"]["encoded"] > 0
    finally:
        feeder.stop.set()
        feeder.thread.join(5)
        node.close()
    assert node.server.process.poll() is not None  # the server process ended with the node


def test_a_login_is_asked_for_when_set() -> None:
    node = LiveSink("live", LiveConfig(rtsp_port=0, draw=False, rtsp_user="u",
                                       rtsp_password="p4ss"))  # fmt: skip
    node.open(StageContext("live", source_ids=["cam"]))
    feeder = Feeder(node)
    try:
        assert node.server is not None
        port = node.server.port
        with pytest.raises(av.FFmpegError):
            play(f"rtsp://127.0.0.1:{port}/cam", 1)
        assert len(play(f"rtsp://u:p4ss@127.0.0.1:{port}/cam", 1)) == 1
        assert "p4ss" not in " ".join(node.server.process.args)  # not on its command line
    finally:
        feeder.stop.set()
        feeder.thread.join(5)
        node.close()


def test_a_port_taken_stops_the_node_saying_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = LiveSink("live", LiveConfig(rtsp_port=port))
        with pytest.raises(PipelineError, match=f"RTSP server on 127.0.0.1:{port} did not start"):
            node.open(StageContext("live", source_ids=["cam"]))
