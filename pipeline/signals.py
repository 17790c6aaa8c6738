"""SIGINT and SIGTERM as a request to stop: the runner drains, a second signal exits at once."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable


def install_stop_signals(handler: Callable[[int], None]) -> Callable[[], None] | None:
    """SIGINT and SIGTERM call ``handler`` (from the main thread only); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: handler(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
