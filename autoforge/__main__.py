"""``python -m autoforge ...`` is ``autoforge ...`` (for environments where the console script is not on PATH)."""

from autoforge.cli import main

raise SystemExit(main())
