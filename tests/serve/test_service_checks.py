"""A POST's body against the running graph, without a service: what is refused, in whose
words, and which secrets the process keeps masking afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from vapipe.pipeline import config, graph
from vapipe.pipeline.urls import mask_credentials
from vapipe.serve.event_hub import EventHub
from vapipe.serve.streams import StreamError, Streams

CONFIG = """\
links = ["cam ! sink", "cam ! events"]
[nodes.cam]
type = "source"
uri = "{clip}"
[nodes.sink]
type = "video"
path = "{video}"
[nodes.events]
type = "events"
path = "out/events.jsonl"
"""


def streams(tmp_path: Path, video: str = "out/{source_id}.mp4") -> Streams:
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"")
    text = CONFIG.format(clip=clip, video=video)
    return Streams(graph.build(config.parse(text, str(tmp_path / "t.toml"))), EventHub())


def test_a_refused_body_s_secrets_are_masked_in_its_error_and_then_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    service = streams(tmp_path)
    # The value quoted back is the URL's password: a refusal in the body's own words.
    body = {"id": "b", "uri": "rtsp://u:never-kept-7@cam/s", "options": {"fps": "never-kept-7"}}
    with pytest.raises(StreamError) as refused:
        service.checked(body, set())
    assert refused.value.status == 422
    assert refused.value.message == (
        "POST /api/streams: node 'b' key 'fps': input should be a valid number, got string '***'"
    )
    assert mask_credentials("was never-kept-7") == "was never-kept-7"
    # Accepted: masked from now on, wherever it shows.
    spec = service.checked({"id": "c", "uri": "rtsp://u:kept-for-c-8@cam/s"}, set())
    assert spec.name == "c"
    assert mask_credentials("was kept-for-c-8") == "was ***"


def test_a_refusal_by_the_graph_check_masks_the_body_s_secrets_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    service = streams(tmp_path, video="out/all.mp4")
    with pytest.raises(StreamError) as refused:
        service.checked({"id": "b", "uri": "x.mp4", "options": {"password": "pw-of-b-9"}}, set())
    assert refused.value.status in (409, 422)
    assert "pw-of-b-9" not in refused.value.message
    assert mask_credentials("pw-of-b-9") == "pw-of-b-9"


def test_the_graph_check_counts_the_streams_added_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.mp4").write_bytes(b"")
    service = streams(tmp_path)
    b = service.checked({"id": "b", "uri": "b.mp4"}, set())
    # Not yet added: its output is nobody's, so another stream may read that name.
    assert service.checked({"id": "c", "uri": "out/b.mp4"}, {"b"}).name == "c"
    service.specs["b"] = b
    with pytest.raises(StreamError) as refused:
        service.checked({"id": "c", "uri": "out/b.mp4"}, {"b"})
    assert refused.value.status == 409
    assert refused.value.message.endswith(
        "node 'sink' key 'path': out/b.mp4 is the input of node 'c': writing it would destroy it"
    )
    # Its own output as its input.
    with pytest.raises(StreamError) as own:
        service.checked({"id": "d", "uri": "out/d.mp4"}, {"b"})
    assert own.value.status == 409 and "out/d.mp4 is the input of node 'd'" in own.value.message


def test_one_fixed_video_path_refuses_a_second_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.mp4").write_bytes(b"")
    service = streams(tmp_path, video="out/all.mp4")
    with pytest.raises(StreamError) as refused:
        service.checked({"id": "b", "uri": "b.mp4"}, set())
    assert refused.value.status == 409
    assert refused.value.message.endswith(
        "node 'sink' key 'path': 2 sources would write to out/all.mp4: put {source_id} in path "
        "(e.g. out/{source_id}.mp4)"
    )


def test_local_inputs_only_under_the_media_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    monkeypatch.chdir(served)
    (served / "clip.mp4").write_bytes(b"")
    elsewhere = tmp_path / "private"
    elsewhere.mkdir()
    (elsewhere / "dog.jpg").write_bytes(b"")
    (served / "link.jpg").symlink_to(elsewhere / "dog.jpg")
    service = streams(served)
    assert service.checked({"id": "a", "uri": "clip.mp4"}, set()).name == "a"
    assert service.checked({"id": "b", "uri": "rtsp://cam.lan/s"}, set()).name == "b"
    for uri in (str(elsewhere / "dog.jpg"), "link.jpg", "../private/dog.jpg", str(elsewhere)):
        with pytest.raises(StreamError) as refused:
            service.checked({"id": "c", "uri": uri}, set())
        assert refused.value.status == 403, uri
        assert refused.value.message.startswith(
            f"uri: {elsewhere / 'dog.jpg'} is outside the media roots ({served}"
        ), refused.value.message
    # Samples (found in the sample media folders) and webcams are named, not paths.
    assert service.checked({"id": "s", "uri": "sample:people"}, set()).name == "s"
    assert service.checked({"id": "w", "uri": "webcam:0"}, set()).name == "w"
    # FFmpeg's other ways to read local files are not inputs a stream may use.
    for uri in (f"concat:{elsewhere}/dog.jpg|clip.mp4", f"file:{elsewhere}/dog.jpg"):
        with pytest.raises(StreamError) as by_protocol:
            service.checked({"id": "c", "uri": uri}, set())
        assert by_protocol.value.status == 403
        assert by_protocol.value.message == (
            f"uri: '{uri.split(':')[0]}:' is not an input a stream may use (http, https, rtmp, "
            "rtmps, rtp, rtsp, rtsps, sample, srt, tcp, udp, webcam, or a path)"
        )
    # Configured roots replace the default.
    service.settings = service.settings.model_copy(update={"media_roots": [str(elsewhere)]})
    assert service.checked({"id": "c", "uri": str(elsewhere / "dog.jpg")}, set()).name == "c"
    # A root itself, as a folder of pictures: every file it reads lies in it.
    assert service.checked({"id": "e", "uri": str(elsewhere)}, set()).name == "e"
    with pytest.raises(StreamError):
        service.checked({"id": "d", "uri": "clip.mp4"}, set())
