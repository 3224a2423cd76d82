"""The EMR Serverless entry point: `emr_main.py JOB [options]`, the same arguments as `python -m jobs JOB …`.

It runs `jobs.runtime.cli.main` (the `jobs` package comes with `--py-files`) and exits with its code, so a failed
job fails the job run. The run's figures reach CloudWatch from the state machine, which reads the run's
`summary.json` after the job (an application without a VPC reaches S3, not CloudWatch metrics).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def run(argv: Sequence[str]) -> int:
    """Run one job; its exit code."""
    from jobs.runtime.cli import main
    from jobs.runtime.invocation import EMR_PROG

    return main(argv, prog=EMR_PROG)  # its printed redo says how to redo a run through the state machine


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
