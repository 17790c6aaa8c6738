"""``python -m vapipe ...`` is ``run-pipeline ...``."""

import sys

from vapipe.pipeline.cli import main

sys.exit(main())
