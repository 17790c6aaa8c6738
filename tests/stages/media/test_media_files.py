"""Retention deletes the oldest of the node's own files and nothing else; the writer never
blocks; file names sort by time."""

from __future__ import annotations

import threading
from pathlib import Path

from vapipe.stages.media.files import Retention, Writer, file_stem, sub_folder

DAY = 86400.0


def own(root: Path, retention: Retention, relative: str, size: int, at: float) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    retention.add(relative, at=at)


def test_size_retention_deletes_the_oldest_first_and_never_a_users_file(tmp_path: Path) -> None:
    users = tmp_path / "a" / "mine.jpg"
    users.parent.mkdir(parents=True)
    users.write_bytes(b"u" * 5000)
    retention = Retention(tmp_path, "snaps", None, 250)
    own(tmp_path, retention, "a/1.jpg", 100, 1.0)
    own(tmp_path, retention, "b/2.jpg", 100, 2.0)
    assert retention.total == 200
    own(tmp_path, retention, "b/3.jpg", 100, 3.0)  # 300 > 250: the oldest goes
    assert not (tmp_path / "a/1.jpg").exists()
    assert (tmp_path / "b/2.jpg").exists() and (tmp_path / "b/3.jpg").exists()
    assert users.read_bytes() == b"u" * 5000
    assert (tmp_path / "a").is_dir()  # the user's file keeps its folder
    assert retention.deleted == 1 and retention.total == 200


def test_age_retention_and_emptied_folders(tmp_path: Path) -> None:
    retention = Retention(tmp_path, "clips", None, None)
    own(tmp_path, retention, "cam/d1/old.mp4", 10, 1000.0)
    own(tmp_path, retention, "cam/d2/new.mp4", 10, 1000.0 + 2 * DAY)
    retention.max_age_s = 2 * DAY
    assert retention.prune(now=1000.0 + 2 * DAY) == []  # exactly at the limit: kept
    assert retention.prune(now=1000.0 + 2 * DAY + 1) == ["cam/d1/old.mp4"]
    assert not (tmp_path / "cam" / "d1").exists()  # the day's folder went with its last file
    assert (tmp_path / "cam" / "d2" / "new.mp4").exists()


def test_the_list_outlives_the_run_and_forgets_files_removed_by_hand(tmp_path: Path) -> None:
    retention = Retention(tmp_path, "snaps", None, None)
    own(tmp_path, retention, "1.jpg", 10, 1.0)
    own(tmp_path, retention, "2.jpg", 20, 2.0)
    own(tmp_path, retention, "3.jpg", 30, 3.0)
    (tmp_path / "2.jpg").unlink()
    again = Retention(tmp_path, "snaps", None, 35)
    assert [w.path for w in again.files] == ["1.jpg", "3.jpg"]
    assert again.prune() == ["1.jpg"]
    third = Retention(tmp_path, "snaps", None, None)
    assert [w.path for w in third.files] == ["3.jpg"]
    # another node's list is its own
    assert Retention(tmp_path, "clips", None, None).files == []


def test_the_writer_refuses_when_full_and_writes_the_rest_in_order(tmp_path: Path) -> None:
    done: list[int] = []
    gate = threading.Event()
    started = threading.Event()

    def work(item: int) -> None:
        started.set()
        gate.wait()
        if item == 2:
            raise OSError("disk full")
        done.append(item)

    writer: Writer[int] = Writer("w", 2, work)
    assert writer.submit(1)
    assert started.wait(10)
    assert writer.submit(2) and writer.submit(3)
    assert not writer.submit(4)
    gate.set()
    writer.close()
    assert done == [1, 3]
    assert (writer.done, writer.failed, writer.dropped) == (2, 1, 1)


def test_names_sort_by_time_and_hold_no_path_characters() -> None:
    event = {"event": "line_cross", "track_id": 7, "line": "north/gate 2"}
    early = file_stem(1_796_000_000.5, 12, event)
    assert early == "005320.500-12-line_cross-t7-north_gate_2"
    assert file_stem(1_796_000_001.0, 3, event) > early
    crowd = {"event": "zone_crowded", "track_id": None, "zone": "z"}
    assert file_stem(0.0, 1, crowd) == "000000.000-1-zone_crowded---z"
    assert sub_folder("{source_id}/{date}", "cam", 1_796_000_000.0) == "cam/2026-11-30"
