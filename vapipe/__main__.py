"""``python -m vapipe ...`` and the ``run-pipeline`` command."""

import os
import signal
import sys


def main() -> int:
    # Until a run has something to drain, Ctrl-C or SIGTERM end the process at once and
    # quietly (130): no traceback out of a half-finished import, nothing open to flush.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: os._exit(130))
    from vapipe.pipeline.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
