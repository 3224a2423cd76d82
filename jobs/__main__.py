"""`python -m jobs …`: the command line."""

from __future__ import annotations

from jobs.runtime.cli import main

raise SystemExit(main())
