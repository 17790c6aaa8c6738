"""Model and sample resolution: search order, offline errors, downloads with sha256 checks."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vapipe.pipeline import assets
from vapipe.pipeline.errors import ConfigError, PipelineError


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $VAPIPE_ASSETS, an empty cwd and an empty cache."""
    monkeypatch.delenv("VAPIPE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_search_order_env_then_local_then_cache(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("env/models", "assets/models", "cache/vapipe/models"):
        (isolated / folder).mkdir(parents=True)
        (isolated / folder / "yolox_nano.onnx").write_bytes(folder.encode())
    monkeypatch.setenv("VAPIPE_ASSETS", str(isolated / "env"))
    assert assets.resolve_model("yolox-nano").read_bytes() == b"env/models"
    monkeypatch.delenv("VAPIPE_ASSETS")
    assert assets.resolve_model("yolox-nano").read_bytes() == b"assets/models"
    (isolated / "assets/models/yolox_nano.onnx").unlink()
    assert assets.resolve_model("yolox-nano").read_bytes() == b"cache/vapipe/models"


def test_offline_and_missing_says_where_it_looked(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAPIPE_OFFLINE", "1")
    with pytest.raises(PipelineError) as caught:
        assets.resolve_media("sample:people")
    message = str(caught.value)
    assert "people.mp4" in message and "assets/media" in message and "cache" in message
    assert "VAPIPE_OFFLINE" in message


def test_paths_and_unknown_names(isolated: Path) -> None:
    model = isolated / "m.onnx"
    model.write_bytes(b"x")
    assert assets.resolve_model(str(model)) == model
    assert assets.resolve_media("rtsp://cam/x") == "rtsp://cam/x"
    with pytest.raises(ConfigError, match=r"model file not found: missing\.onnx"):
        assets.resolve_model("missing.onnx")
    with pytest.raises(ConfigError, match="unknown model 'yolo-nope'; known: yolox-nano"):
        assets.resolve_model("yolo-nope")


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()


def test_download_checks_sha256(
    isolated: Path, http_root: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, root = http_root
    payload = b"not really a video"
    (root / "clip.mp4").write_bytes(payload)
    entry = {
        "file": "clip.mp4",
        "url": f"{base}/clip.mp4",
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    monkeypatch.delenv("VAPIPE_OFFLINE", raising=False)
    monkeypatch.setattr(assets, "manifest_entries", lambda kind: {"clip": entry})
    path = assets.fetch("media", "clip")
    assert path == isolated / "cache/vapipe/media/clip.mp4" and path.read_bytes() == payload
    entry["sha256"] = "0" * 64
    with pytest.raises(PipelineError, match="sha256 mismatch"):
        assets.fetch("media", "clip", force_download=True)
    entry["url"] = f"{base}/gone.mp4"
    with pytest.raises(PipelineError, match=r"downloading .*gone\.mp4 failed"):
        assets.fetch("media", "clip", force_download=True)


def test_a_converter_that_cannot_run_is_a_one_line_error(
    isolated: Path, http_root: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    from vapipe.pipeline.errors import MissingDependencyError

    base, root = http_root
    (root / "w.pt").write_bytes(b"weights")
    entry = {"file": "w.onnx", "url": f"{base}/w.pt", "convert": "nope"}
    monkeypatch.delenv("VAPIPE_OFFLINE", raising=False)
    monkeypatch.setattr(assets, "manifest_entries", lambda kind: {"w": entry})
    with pytest.raises(PipelineError, match=r"^unknown converter 'nope' in the model manifest$"):
        assets.fetch("models", "w")
    real_import = builtins.__import__

    def no_ultralytics(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ultralytics":
            raise ModuleNotFoundError("No module named 'ultralytics'", name="ultralytics")
        return real_import(name, *args, **kwargs)

    entry["convert"] = "ultralytics"
    monkeypatch.setattr(builtins, "__import__", no_ultralytics)
    with pytest.raises(MissingDependencyError, match=r"converting w\.pt to ONNX needs the "
                       r"'ultralytics' package: pip install ultralytics"):  # fmt: skip
        assets.fetch("models", "w")
    assert not (isolated / "cache/vapipe/models/w.onnx").exists()


def test_download_progress_line(http_root: tuple[str, Path], tmp_path: Path) -> None:
    import io

    base, root = http_root
    (root / "model.onnx").write_bytes(b"x" * (3 * 2**20 + 5))
    shown = io.StringIO()
    assets.download_file(f"{base}/model.onnx", tmp_path / "m.onnx", progress=shown)
    frames = shown.getvalue().split("\r")
    assert frames[-1].startswith("model.onnx [" + "#" * 30 + "] 3.0/3.0 MiB"), frames[-1]
    assert len(frames) >= 4, "one update per MiB received"


def test_a_local_file_under_a_manifest_name_is_sha256_checked(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    published, other = b"the published clip", b"something else"
    entry = {
        "file": "clip.mp4",
        "url": "http://127.0.0.1:9/clip.mp4",
        "sha256": hashlib.sha256(published).hexdigest(),
        "also_sha256": [hashlib.sha256(b"an equivalent export").hexdigest()],
    }
    monkeypatch.setattr(assets, "manifest_entries", lambda kind: {"clip": entry})
    local = isolated / "assets" / "media" / "clip.mp4"
    local.parent.mkdir(parents=True)
    for content, warned in [
        (published, False),
        (b"an equivalent export", False),
        (other, True),
    ]:
        caplog.clear()
        local.write_bytes(content)
        os.utime(local, ns=(len(content), len(content)))  # a new file for the digest cache
        with caplog.at_level("WARNING", logger="vapipe.pipeline.assets"):
            assert assets.fetch("media", "clip") == Path("assets/media/clip.mp4")
        said = [r.getMessage() for r in caplog.records]
        assert bool(said) == warned, said
    assert "is not the manifest's file (sha256 " in said[0]
    assert hashlib.sha256(other).hexdigest()[:12] in said[0]
