"""``python -m vapipe ...`` and the ``run-pipeline`` command."""

import faulthandler
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
    from vapipe.pipeline.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
