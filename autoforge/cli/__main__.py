"""``python -m autoforge.cli ...``: the same as ``autoforge ...``."""

import sys

from autoforge.cli import main

sys.exit(main())
