"""Hostile and mistaken input: one line naming what is wrong, the exit code the README
promises (2 for config and usage, found before any frame where it can be), never a traceback;
and mistakes that would silently do nothing are warned about when the run starts."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, REPO, cli

ANALYTICS = REPO / "configs" / "analytics.toml"


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def no_frame_written(folder: Path) -> bool:
    """No events file of the config's (file.toml's events.jsonl, analytics.toml's ...) holds
    a line."""
    return all(events.read_text() == "" for events in (folder / "out").glob("*.jsonl"))


@pytest.mark.parametrize(
    ("config", "overrides", "expected"),
    [
        pytest.param(
            FILE_CONFIG, ["video.path=out/{source_id.x}.mp4"],
            "node 'video' key 'path': bad placeholder in 'out/{source_id.x}.mp4'",
            id="attribute-of-a-placeholder",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[0, 0], end=[nan, 5]}]'],
            "node 'analytics' key 'lines.0.end.0': input should be a finite number",
            id="nan-in-a-line",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[0, 0], end=[1e308, 5]}]'],
            "key 'lines.0.end.0': input should be less than or equal to 1000000",
            id="huge-line",
        ),
        pytest.param(
            ANALYTICS, ['analytics.zones=[{name="z", polygon=[[0, 0], [inf, 0], [0, 9]]}]'],
            "key 'zones.0.polygon.1.0': input should be a finite number",
            id="inf-in-a-zone",
        ),
        pytest.param(
            ANALYTICS,
            ['analytics.lines=[{name="a", start=[0, 0], end=[9, 9], in_label="by_class"}]'],
            "line 'a': 'by_class' is a key of the counts already",
            id="label-as-a-summary-key",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[0, 0], end=[0, 0]}]'],
            "--set analytics.lines=",
            id="geometry-error-names-the-set",
        ),
        pytest.param(
            FILE_CONFIG, ["video.path=in.mp4/a.mp4"],
            "node 'video' key 'path': cannot write in.mp4/a.mp4",
            id="video-folder-is-a-file",
        ),
        pytest.param(
            FILE_CONFIG, ["video.codec=h264_nvenc"],
            "node 'video' key 'codec': encoder 'h264_nvenc'",
            id="encoder-that-does-not-open",
        ),
        pytest.param(
            FILE_CONFIG, ["video.codec=nonesuch"],
            "node 'video' key 'codec': encoder 'nonesuch' is not in this FFmpeg",
            id="unknown-encoder",
        ),
        pytest.param(
            FILE_CONFIG, ["video.codec=aac"],
            "node 'video' key 'codec': encoder 'aac' is not a video encoder (audio)",
            id="audio-encoder",
        ),
    ],
)  # fmt: skip
def test_config_mistakes_are_one_line_and_exit_2_before_any_frame(
    tmp_path: Path, config: Path, overrides: list[str], expected: str
) -> None:
    (tmp_path / "in.mp4").write_bytes(asset("media", "people.mp4").read_bytes())
    args = [str(config), "--max-frames", "5"]
    for override in overrides:
        args += ["--set", override]
    result = cli(*args, cwd=tmp_path)
    line = last_line(result)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in line, line
    assert no_frame_written(tmp_path)


def test_analytics_without_a_track_node_is_refused_when_the_graph_is_built(
    tmp_path: Path,
) -> None:
    text = ANALYTICS.read_text().replace("nms ! track ! analytics", "nms ! analytics")
    config = tmp_path / "a.toml"
    # The table up to the next one (a commented-out example table inside it stays a comment).
    config.write_text(re.sub(r"^\[nodes\.track\].*?(?=^\[)", "", text, flags=re.S | re.M))
    result = cli(str(config), "--max-frames", "5", cwd=tmp_path)
    line = last_line(result)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "node 'analytics': needs a 'track' node before it, on the way from source 'cam'" in (
        line
    ), line


def test_values_nested_too_deeply_are_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_text('links = ["a ! b"]\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    result = cli(str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert last_line(result) == f"error: {config}: values are nested too deeply to be a pipeline"


def test_a_very_wide_or_tall_picture_runs(tmp_path: Path) -> None:
    import cv2

    for name, shape in (("wide.png", (10, 10000, 3)), ("tall.png", (10000, 10, 3))):
        cv2.imwrite(str(tmp_path / name), np.full(shape, 128, np.uint8))
        result = cli(
            str(FILE_CONFIG), "--set", f"cam.uri={name}", "--set", "video.path=out/x.png",
            cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        assert cv2.imread(str(tmp_path / "out" / "x.png")).shape == shape


def test_a_full_disk_says_so(tmp_path: Path) -> None:
    result = cli(str(FILE_CONFIG), "--set", "events.path=/dev/full", "--max-frames", "5",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1
    line = last_line(result)
    assert "stage 'events'" in line and "No space left on device" in line, line


def test_running_out_of_memory_is_one_line(tmp_path: Path) -> None:
    def limited() -> None:  # prlimit --as: numpy, onnxruntime and FFmpeg cannot all map
        resource.setrlimit(resource.RLIMIT_AS, (700 * 2**20, 700 * 2**20))

    result = subprocess.run(
        [sys.executable, "-m", "vapipe", str(FILE_CONFIG), "--max-frames", "5"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, preexec_fn=limited,
        check=False,
    )  # fmt: skip
    line = last_line(result)
    assert result.returncode == 1 and line.startswith("error: "), result.stderr[-2000:]


def test_with_json_logs_the_summary_and_the_error_are_json(tmp_path: Path) -> None:
    done = cli(str(FILE_CONFIG), "--max-frames", "5", "--log-format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    entries = [json.loads(line) for line in done.stderr.strip().splitlines()]
    summary = entries[-1]
    assert summary["message"] == "summary" and summary["summary"]["stages"]["cam"]["frames"] == 5
    failed = cli(
        str(FILE_CONFIG), "--set", "video.codec=nonesuch", "--log-format", "json", cwd=tmp_path
    )
    error = json.loads(failed.stderr.strip().splitlines()[-1])
    assert error["level"] == "error" and error["exit_code"] == failed.returncode == 2
    assert "encoder 'nonesuch'" in error["message"]


@pytest.mark.parametrize(
    ("config", "overrides", "warning"),
    [
        pytest.param(
            ANALYTICS, ['analytics.zones=[{name="z", polygon=[[0, 0], [99, 0], [0, 99]], '
                        'source="cam2"}]'],
            "zone 'z' is for source 'cam2', which this run does not have",
            id="zone-for-no-source",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[0, 0], end=[99, 99], '
                        'classes=["carr"]}]'],
            "line 'a': the model has no class 'carr' (did you mean 'car'?)",
            id="unknown-class",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[0.5, 0], end=[0.5, 1]}]'],
            "line 'a' is 1.0 px long on source 'cam' (640x360); coordinates in 0-1 need "
            "normalized = true",
            id="normalized-line-given-as-pixels",
        ),
        pytest.param(
            ANALYTICS, ['analytics.lines=[{name="a", start=[700, 0], end=[700, 300]}]'],
            "line 'a' ([700, 0] to [700, 300]) lies outside the picture on source 'cam' "
            "(640x360): nothing can cross it",
            id="line-outside-the-picture",
        ),
        pytest.param(
            ANALYTICS, ['analytics.zones=[{name="z", polygon=[[0, 0], [0.5, 0], [0.5, 0.5]]}]'],
            "zone 'z' is 0.1 px² on source 'cam' (640x360)",
            id="zone-given-in-0-1-as-pixels",
        ),
        pytest.param(
            ANALYTICS, ['analytics.zones=[{name="z", polygon=[[0, 400], [99, 400], [0, 499]]}]'],
            "zone 'z' lies outside the picture on source 'cam' (640x360)",
            id="zone-outside-the-picture",
        ),
        pytest.param(
            FILE_CONFIG, ["video.max_segments=3"],
            "max_segments does nothing without segment_s",
            id="max-segments-alone",
        ),
    ],
)  # fmt: skip
def test_mistakes_that_would_do_nothing_are_warned_about(
    tmp_path: Path, config: Path, overrides: list[str], warning: str
) -> None:
    args = [str(config), "--max-frames", "5"]
    for override in overrides:
        args += ["--set", override]
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sum(warning in line for line in result.stderr.splitlines()) >= 1, result.stderr[-3000:]


def test_an_event_type_no_stage_emits_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    from vapipe.stages.sinks.outbox_sink import OutboxConfig

    with caplog.at_level("WARNING", logger="vapipe.stages.events.outbox"):
        OutboxConfig(event_types=["line_cross", "line_crossing"])
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1, said
    assert "no built-in stage emits 'line_crossing' (did you mean 'line_cross'?)" in said[0]
