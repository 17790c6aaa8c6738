"""What a benchmark run of the pipeline samples while it runs: GPU utilisation and memory
(nvidia-smi), the process tree's RSS, the machine's busy CPU time and the events file's lines
(the steady rate), and on request a few seconds of py-spy samples of the busiest processes."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class Sampler:
    """GPU utilisation and memory (nvidia-smi), the process tree's RSS and the machine's busy
    CPU time (/proc/stat), every 0.25 s."""

    def __init__(self, pid: int, events: Path | None = None) -> None:
        self.pid = pid
        self.events = events
        self._events_read = 0
        self.lines: list[tuple[float, int]] = []  # (monotonic s, event lines so far)
        self.gpu_util: list[float] = []
        self.gpu_mem_mb: list[float] = []
        self.rss_mb: list[float] = []
        self.cpu: list[tuple[float, int, int]] = []  # (monotonic s, busy jiffies, all jiffies)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        smi = shutil.which("nvidia-smi")
        while not self._stop.wait(0.25):
            self._count_lines()
            self.cpu.append((time.monotonic(), *machine_jiffies()))
            self.rss_mb.append(tree_rss_mb(self.pid))
            if smi:
                line = subprocess.run(
                    [smi, "--query-gpu=utilization.gpu,memory.used",
                     "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, check=False,
                ).stdout.strip().splitlines()  # fmt: skip
                if line:
                    util, mem = (float(v) for v in line[0].split(","))
                    self.gpu_util.append(util)
                    self.gpu_mem_mb.append(mem)

    def _count_lines(self) -> None:
        """The events file's lines so far (one per frame, written whole and unbuffered)."""
        if self.events is None or not self.events.exists():
            return
        with self.events.open("rb") as handle:
            handle.seek(self._events_read)
            chunk = handle.read()
        # Count only up to the last newline: a line being written is counted next time.
        whole = chunk.rfind(b"\n") + 1
        self._events_read += whole
        count = (self.lines[-1][1] if self.lines else 0) + chunk.count(b"\n", 0, whole)
        self.lines.append((time.monotonic(), count))

    def steady_rate(self, low: float = 0.2, high: float = 0.8) -> float | None:
        """Event lines per second between the moments ``low`` and ``high`` of the run's
        lines had been written: the steady rate, past the shards' start and before the
        first ones finish, the same measure for any build (it reads only the output)."""
        if not self.lines or self.lines[-1][1] < 100:
            return None
        total = self.lines[-1][1]
        start = next(p for p in self.lines if p[1] >= low * total)
        end = next(p for p in self.lines if p[1] >= high * total)
        return round((end[1] - start[1]) / (end[0] - start[0]), 1) if end[0] > start[0] else None

    def steady_cpu_busy(self, low: float = 0.2, high: float = 0.8) -> float | None:
        """The machine's cores busy (percent of all) over the same span as ``steady_rate``."""
        if not self.lines or self.lines[-1][1] < 100 or len(self.cpu) < 2:
            return None
        total = self.lines[-1][1]
        start = next(p for p in self.lines if p[1] >= low * total)[0]
        end = next(p for p in self.lines if p[1] >= high * total)[0]
        inside = [c for c in self.cpu if start <= c[0] <= end]
        if len(inside) < 2 or inside[-1][2] == inside[0][2]:
            return None
        first, last = inside[0], inside[-1]
        return round(100 * (last[1] - first[1]) / (last[2] - first[2]), 1)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(2)
        self._count_lines()
        busy = [u for u in self.gpu_util if u > 0]
        return {
            "gpu_util_mean_pct": round(statistics.mean(busy), 1) if busy else None,
            "gpu_util_max_pct": max(self.gpu_util, default=None),
            "gpu_memory_max_mb": max(self.gpu_mem_mb, default=None),
            "host_rss_peak_mb": round(max(self.rss_mb, default=0.0), 1),
        }


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) CPU time of the whole machine so far, from /proc/stat's first line."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def tree_rss_mb(root: int) -> float:
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(entry), int(fields.get("PPid", "0").strip() or 0)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = float(fields.get("VmRSS", "0 kB").split()[0]) / 1024
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


def spy(process: subprocess.Popen[str], into: Path, name: str) -> None:
    """4 s of py-spy samples of the parent (it takes every shard's frames for the sinks) and
    the two largest processes under it (shards, not the forkserver),
    ``VAPIPE_BENCH_SPY_AFTER`` seconds (default 8) into the run, and one ``top``.
    ``VAPIPE_BENCH_SPY_ARGS``: more of py-spy's options (``--gil``: only the samples that
    hold the interpreter lock; ``--native --threads --idle``: where each thread waits)."""
    import psutil

    time.sleep(float(os.environ.get("VAPIPE_BENCH_SPY_AFTER", "8")))
    if process.poll() is not None:
        return
    into.mkdir(parents=True, exist_ok=True)
    tree = psutil.Process(process.pid).children(True)
    busy = [psutil.Process(process.pid)]
    busy += sorted(tree, key=lambda p: p.memory_info().rss)[-2:]  # shards, not the forkserver
    top = subprocess.run(["top", "-b", "-n", "1", "-w", "200"], capture_output=True, text=True)
    more = os.environ.get("VAPIPE_BENCH_SPY_ARGS", "").split()
    # native stacks need the process paused while they are read: py-spy refuses --nonblocking
    pause = [] if "--native" in more else ["--nonblocking"]
    records = [
        subprocess.Popen(
            ["py-spy", "record", "--pid", str(p.pid), "-d", "4", "-r", "50", "-f", "raw",
             *pause, *more,
             "-o", str(into / f"spy_{name}_{i}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i, p in enumerate(busy)
    ]  # fmt: skip
    for record in records:
        record.wait(60)
    (into / f"top_{name}.txt").write_text(top.stdout[:20000])
