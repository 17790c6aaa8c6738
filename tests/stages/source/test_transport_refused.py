"""An RTSP server that refuses the transport asked for (VLC's serves RTP over UDP only and
answers TCP's SETUP with 461) is reported with what to set, not FFmpeg's bare "Protocol not
supported". The server here is a few lines of RTSP on a loopback socket."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from vapipe.pipeline.errors import PipelineError
from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.inputs import input_spec
from vapipe.stages.source.opening import Connector

SDP = ("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\n"
       "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=control:track1\r\n")  # fmt: skip


def _answer(conn: socket.socket) -> None:
    with conn, conn.makefile("rb") as reader:
        while line := reader.readline():
            headers = {}
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            cseq, method = headers.get("cseq", "0"), line.split()[0].decode()
            if method == "DESCRIBE":
                reply = (f"200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\n"
                         f"Content-Base: rtsp://127.0.0.1/s/\r\nContent-Length: {len(SDP)}"
                         f"\r\n\r\n{SDP}")  # fmt: skip
            elif method == "SETUP":
                reply = f"461 Unsupported transport\r\nCSeq: {cseq}\r\n\r\n"
            else:
                reply = f"200 OK\r\nCSeq: {cseq}\r\nPublic: DESCRIBE, SETUP, PLAY\r\n\r\n"
            conn.sendall(f"RTSP/1.0 {reply}".encode())


@contextmanager
def refusing_server() -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=_answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"rtsp://127.0.0.1:{listener.getsockname()[1]}/s"
    finally:
        done.set()
        listener.close()


@pytest.mark.parametrize(("asked", "other"), [("tcp", "udp"), ("udp", "tcp")])
def test_a_refused_transport_says_which_one_to_set(asked: str, other: str) -> None:
    with refusing_server() as url:
        config = SourceConfig(uri=url, transport=asked, open_timeout_s=5)
        connector = Connector("cam", "cam", config, True, 1)
        with pytest.raises(PipelineError) as refused:
            connector.open(input_spec(url, transport=asked, open_timeout_s=5), url)
    assert str(refused.value) == (
        f"cannot open {url}: Protocol not supported "
        f'(the server refuses RTSP over {asked.upper()}: set transport = "{other}")'
    )


def test_other_open_errors_get_no_transport_hint() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nobody listens there: refused
    url = f"rtsp://127.0.0.1:{port}/s"
    connector = Connector("cam", "cam", SourceConfig(uri=url, open_timeout_s=5), True, 1)
    with pytest.raises(PipelineError) as refused:
        connector.open(input_spec(url, open_timeout_s=5), url)
    assert str(refused.value) == f"cannot open {url}: Connection refused"
