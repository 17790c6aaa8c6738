"""The media sinks' shared keys and their edges: bounds of the config, the source id checked
where it names a folder, the media folder itself never deleted, failures and drops said once."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from tests.stages.sinks.config_bounds import assert_bounds
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.media.files import Retention, Writer, sub_folder
from vapipe.stages.sinks.media_sink import MediaConfig
from vapipe.stages.sinks.snapshots import SnapshotsConfig, SnapshotsSink


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [("queue", [1, 10_000], [0, 10_001]), ("max_age_days", [0.01], [0, -1]),
     ("max_bytes", [1], [0, -1])],
)  # fmt: skip
def test_bounds_of_the_shared_keys(key: str, good: list[object], bad: list[object]) -> None:
    assert_bounds(MediaConfig, key, good, bad)
    defaults = MediaConfig()
    assert (defaults.queue, defaults.max_age_days, defaults.max_bytes) == (64, None, None)
    assert defaults.event_types == ["line_cross", "zone_enter", "zone_dwell"]


def test_a_source_id_is_checked_only_where_it_names_a_folder() -> None:
    with pytest.raises(ConfigError, match="cannot be put in the file name"):
        sub_folder("{source_id}/{date}", "a/b", 0.0)
    assert sub_folder("all/{date}", "a/b", 0.0) == "all/1970-01-01"


def test_the_media_folder_itself_is_never_deleted(tmp_path: Path) -> None:
    root = tmp_path / "media"
    root.mkdir()
    retention = Retention(root, "snaps", None, 1)
    (root / "only.jpg").write_bytes(b"xx")
    retention.add("only.jpg", at=1.0)  # over max_bytes at once: deleted
    assert not (root / "only.jpg").exists()
    assert root.is_dir() and tmp_path.is_dir()
    nested = Retention(root, "clips", None, 1)
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c.mp4").write_bytes(b"xx")
    nested.add("a/b/c.mp4", at=1.0)
    assert not (root / "a").exists() and root.is_dir()


def test_exactly_max_bytes_is_kept(tmp_path: Path) -> None:
    retention = Retention(tmp_path, "snaps", None, 4)
    for name in ("1.jpg", "2.jpg"):
        (tmp_path / name).write_bytes(b"xx")
        retention.add(name, at=1.0)
    assert retention.total == 4 and retention.deleted == 0


def test_the_writer_thread_never_holds_the_process_and_says_a_failure_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(item: int) -> None:
        raise OSError(f"disk full {item}")

    writer: Writer[int] = Writer("snaps-writer", 8, fail)
    assert writer._thread.daemon  # a stuck disk must not keep a finished run alive
    with caplog.at_level(logging.WARNING):
        for item in range(3):
            writer.submit(item)
        writer.close()
    said = [r.getMessage() for r in caplog.records if "could not write" in r.getMessage()]
    assert said == ["snaps-writer: could not write a file (disk full 0); counting"]
    assert writer.failed == 3


def sink(tmp_path: Path, **config: object) -> SnapshotsSink:
    node = SnapshotsSink("snaps", SnapshotsConfig.model_validate({"dir": str(tmp_path), **config}))
    node.open(None)  # type: ignore[arg-type]
    return node


def test_the_age_limit_is_in_days(tmp_path: Path) -> None:
    node = sink(tmp_path, max_age_days=1.5)
    assert node.retention.max_age_s == 1.5 * 86400
    node.close()
    assert sink(tmp_path).retention.max_age_s is None


def test_drops_are_said_when_the_node_closes_and_only_then(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = sink(tmp_path)
    with caplog.at_level(logging.WARNING):
        node.close()
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]
    node = sink(tmp_path, queue=1)
    gate = threading.Event()
    node.writer.close()
    node.writer = Writer("snaps-writer", 1, lambda item: gate.wait())
    node.writer.submit(None)  # type: ignore[arg-type] - held by the gate
    while node.writer.submit(None):  # type: ignore[arg-type]
        pass
    gate.set()
    with caplog.at_level(logging.WARNING):
        node.close()
    said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(said) == 1 and "queue = 1" in said[0]
