"""``python -m vapipe ...`` and the ``run-pipeline`` command."""

import os
import signal
import sys


def main() -> int:
    # Until the CLI takes over, Ctrl-C ends the process quietly: no traceback out of a
    # half-finished import.
    signal.signal(signal.SIGINT, lambda _signum, _frame: os._exit(130))
    from vapipe.pipeline.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
