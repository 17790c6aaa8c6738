"""Secrets never leave the process: many failing and succeeding runs, with the secret in a
camera URL, an MQTT password and a webhook URL; every output (stderr, stdout, stats, events)
is searched for it raw, percent-encoded, percent-decoded and cut short."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.e2e.helpers import REPO, cli
from tests.e2e.rtsp import free_port, rtsp_server
from vapipe.pipeline.stage import StageConfig
from vapipe.stages.source.config import SourceConfig

SECRET = "Zq9xK7:p@ss/w0rd"
ENCODED = quote(SECRET, safe="")  # Zq9xK7%3Ap%40ss%2Fw0rd
FORMS = (SECRET, ENCODED, ENCODED.lower(), SECRET[:6], "p@ss/w0rd", "p%40ss")
RTSP = str(REPO / "configs" / "rtsp.toml")


def outputs(folder: Path, *texts: str) -> str:
    found = list(texts)
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".log", ".txt"):
            found.append(path.read_text(errors="replace"))
    return "\n".join(found)


def assert_clean(text: str) -> None:
    for form in FORMS:
        assert form not in text, (
            f"the secret leaked as {form!r}: ...{text[text.find(form) - 80 :][:200]}"
        )


def url(port: int, path: str = "stream", scheme: str = "rtsp://") -> str:
    return f"{scheme}admin:{ENCODED}@127.0.0.1:{port}/{path}"


@pytest.mark.parametrize(
    "override",
    [f"cam.password:{SECRET}", f"cam.password {SECRET}", f"cam={{password = '{SECRET}'}}",
     f"cam.reconnect={{password = '{SECRET}'}}"],
)  # fmt: skip
def test_a_set_in_any_shape_never_shows_its_value(tmp_path: Path, override: str) -> None:
    result = cli(RTSP, "--set", override, cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "'cam" in result.stderr, result.stderr[-2000:]
    assert_clean(result.stderr + result.stdout)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param([f"cam.uri={url(free_port())}", "cam.reconnect.max_attempts=1"], id="refused"),
        pytest.param([f"cam.uri={url(free_port(), scheme='rtsp//')}"], id="mistyped-scheme"),
        pytest.param(
            [f"cam.uri={url(free_port())}", f'cam.open_timeout_s="{url(1, "x" * 60)}"'],
            id="type-error-cut-short",
        ),
        pytest.param([f"cam.uri={url(free_port())}", "cam.transport=quic"], id="bad-transport"),
        pytest.param(
            [f"cam.uri={url(free_port(), scheme='http://')}", "cam.open_timeout_s=2"], id="http"
        ),
    ],
)
def test_failing_runs_never_show_the_secret(tmp_path: Path, overrides: list[str]) -> None:
    args = [RTSP, "--stats", "stats.json", "--log-level", "debug"]
    for override in overrides:
        args += ["--set", override]
    result = cli(*args, cwd=tmp_path, timeout=120)
    assert result.returncode in (1, 2), result.stderr[-2000:]
    if "transport" not in overrides[-1]:
        assert "***" in result.stderr, "the URL should still be shown, masked"
    assert_clean(outputs(tmp_path, result.stderr, result.stdout))


def test_a_live_run_with_mqtt_and_webhook_secrets_never_shows_them(
    tmp_path: Path, people_mp4: Path
) -> None:
    text = (REPO / "configs" / "rtsp.toml").read_text()
    text = text.replace('"nms ! events"]', '"nms ! events", "nms ! mqtt", "nms ! hook"]')
    dead = free_port()
    text += (
        f'\n[nodes.mqtt]\ntype = "mqtt"\nport = {dead}\nusername = "cam"\n'
        f'password = "{SECRET}"\ndrain_s = 0.5\n'
        f'\n[nodes.hook]\ntype = "webhook"\nurl = "{url(dead, "hook", "http://")}"\n'
        f'headers = {{ Authorization = "Bearer {SECRET}" }}\ndrain_s = 0.5\ntimeout_s = 0.5\n'
    )
    config = tmp_path / "live.toml"
    config.write_text(text)
    with rtsp_server(people_mp4) as server:
        result = cli(
            str(config), "--set", f"cam.uri={url(server.port)}", "--max-frames", "30",
            "--stats", "stats.json", "--log-level", "debug", cwd=tmp_path, timeout=120,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "rtsp://***@127.0.0.1" in result.stderr
    assert_clean(outputs(tmp_path, result.stderr, result.stdout))


def test_config_reprs_are_masked() -> None:
    config = SourceConfig(uri=url(554))
    for text in (repr(config), str(config), repr(StageConfig())):
        assert_clean(text)
    assert "rtsp://***@127.0.0.1:554/stream" in repr(config)


SINK_CONFIG = """\
links = ["cam ! sink"]
[nodes.cam]
type = "source"
uri = "x.mp4"
[nodes.sink]
"""


@pytest.mark.parametrize(
    "table",
    [
        'type = "webhook"\nurl = "http://127.0.0.1:1/e"\nheaders = "Bearer hdr-s3cret"',
        'type = "mqtt"\nusername = "u"\npassword = { x = "tbl-s3cret" }',
        'type = "mqtt"\nusername = "u"\npassword = ["lst-s3cret"]',
        'type = "webhook"\nurl = "http://127.0.0.1:x/e?access_token=qry-s3cret"',
    ],
    ids=["headers-as-a-string", "password-as-a-table", "password-as-a-list", "query-token"],
)
def test_a_secret_in_the_wrong_shape_is_masked_in_the_config_error(table: str) -> None:
    from vapipe.pipeline import config
    from vapipe.pipeline.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        config.parse(SINK_CONFIG + table + "\n", "s.toml")
    message = str(caught.value)
    assert "node 'sink'" in message and "s3cret" not in message, message
    assert "***" in message, message
