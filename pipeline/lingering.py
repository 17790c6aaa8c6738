"""Threads that may outlive their run: stage threads, and the threads a source abandons when
FFmpeg cannot be interrupted (opening a camera that accepts and stays silent).

Such a daemon thread sits inside a native call. When the interpreter shuts down around it and
the call comes back into Python, the process can crash (SIGSEGV after a clean "exit 130"), so
the process entry point (vapipe/__main__) asks ``alive()`` and, when any is, ends the process
without that shutdown once the run's outputs are closed.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
import weakref

log = logging.getLogger(__name__)

_watched: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def watch(thread: threading.Thread) -> threading.Thread:
    """Count ``thread`` among those that may linger; returns it."""
    _watched.add(thread)
    return thread


def alive() -> list[threading.Thread]:
    """The watched threads still running."""
    return [thread for thread in list(_watched) if thread.is_alive()]


def log_stacks(threads: list[threading.Thread]) -> None:
    """Where each of ``threads`` is now, in the log (why a stage did not drain)."""
    frames = sys._current_frames()
    for thread in threads:
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            where = "".join(traceback.format_stack(frame, limit=8)).rstrip()
            log.warning("thread %s is at:\n%s", thread.name, where)
