"""A large gallery: Ctrl-C while it is read at start ends the run at once (exit 130, the
reading given up between two pictures), and pictures added while running are read on the
gallery's own thread, only the new ones, while frames keep flowing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from tests.e2e.helpers import wait_for

GRAPH = """\
links = ["cam ! pre ! det ! nms ! track ! who ! events"]
[nodes.cam]
type = "source"
uri = "sample:people"
{source}
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
classes = [0]
[nodes.track]
type = "track"
[nodes.who]
type = "embed"
model = "person-reid"
fit = "stretch"
on_classes = ["person"]
gallery = "gallery"
gallery_check_s = 0.05
[nodes.events]
type = "events"
path = "out/events.jsonl"
"""


def people(folder: Path, count: int, start: int = 0) -> None:
    """``count`` pictures of made-up people, one folder each."""
    rng = np.random.default_rng(start)
    folder.mkdir(exist_ok=True)
    for index in range(start, start + count):
        picture = rng.integers(0, 255, (128, 64, 3), np.uint8)
        # Made beside, then moved in whole (as rsync does): a half-written file would be
        # refused, then read again once whole, and counted twice here.
        staging = folder.parent / f"p{index:04d}"
        staging.mkdir()
        cv2.imwrite(str(staging / "1.png"), picture)
        os.replace(staging, folder / staging.name)


def run_in_background(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    log = tmp_path / "stderr.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "vapipe", "graph.toml", "--no-progress", "--log-level", "info",
         *args],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True,
    )  # fmt: skip
    return process, log


@contextlib.contextmanager
def ctrl_c_at_the_end(process: subprocess.Popen[str]) -> Iterator[None]:
    """Ctrl-C once the block is done; the process never outlives the test."""
    try:
        yield
        process.send_signal(signal.SIGINT)
        process.wait(240)
    finally:
        process.kill()
        process.wait()


def test_ctrl_c_while_a_large_gallery_is_read_ends_the_run(tmp_path: Path) -> None:
    people(tmp_path / "gallery", 1500)
    (tmp_path / "graph.toml").write_text(GRAPH.format(source=""))
    process, log = run_in_background(tmp_path)
    with ctrl_c_at_the_end(process):
        wait_for(lambda: "reading 1500 pictures" in log.read_text(), 240, "the reading", log)
    text = log.read_text()
    assert process.returncode == 130, text[-2000:]
    assert "who: stopped while reading the gallery" in text, text[-2000:]
    assert "pictures of" not in text, "the whole gallery was read before the run ended"
    assert "Traceback" not in text
    assert not (tmp_path / "out" / "events.jsonl").exists(), "frames ran after Ctrl-C"


def test_pictures_added_while_running_are_read_once_and_frames_keep_flowing(
    tmp_path: Path,
) -> None:
    people(tmp_path / "gallery", 3)
    (tmp_path / "graph.toml").write_text(GRAPH.format(source="loop = true"))
    process, log = run_in_background(tmp_path, "--stats", "stats.json")
    with ctrl_c_at_the_end(process):
        events = tmp_path / "out" / "events.jsonl"
        wait_for(lambda: events.exists() and events.stat().st_size > 0, 240, "frames", log)
        for batch in range(4):  # pictures trickling in while frames run
            people(tmp_path / "gallery", 50, start=100 + 50 * batch)
            wait_for(lambda b=batch: f"{3 + 50 * (b + 1)} pictures of" in log.read_text(),
                     240, f"the change {batch}", log)  # fmt: skip
        lines_then = len(events.read_text().splitlines())
        wait_for(lambda: len(events.read_text().splitlines()) > lines_then + 10, 240,
                 "frames after the changes", log)  # fmt: skip
    text = log.read_text()
    assert process.returncode == 130, text[-2000:]
    read = [int(line.split(": reading ")[1].split()[0]) for line in text.splitlines()
            if "gallery gallery: reading" in line]  # fmt: skip
    assert read[0] == 3 and sum(read) == 203, read  # each picture read once
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["stages"]["events"]["lines"] >= lines_then
