"""``python -m vapipe ...`` and the ``run-pipeline`` command."""

import contextlib
import faulthandler
import logging
import os
import signal
import sys


def main() -> int:
    # Until a run has something to drain, Ctrl-C or SIGTERM end the process at once and
    # quietly (130): no traceback out of a half-finished import, nothing open to flush.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: os._exit(130))
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck run is waiting on.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    from vapipe.cli.main import main as cli_main

    code = cli_main()
    from vapipe.pipeline import lingering

    if lingering.alive():
        # The run is over and its outputs are closed, but a thread is still inside a native
        # call (FFmpeg opening a silent camera): the interpreter's shutdown around it can
        # crash the process (SIGSEGV after "exit 130"). Nothing is left to flush but the
        # standard streams and the log handlers.
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # closed by its reader
                stream.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
