"""The Lambda function that plans a scheduled run before any EMR job run starts: `handler(event, context)`.

Event: `{"runId": ID, "input": "s3://…/", "output": "s3://…/deduplicated", "config": "s3://…/config.json"}`,
the dedup job's own `--input`, `--output` and `--config`. It writes (or, on a redrive, finds) the run's
ledger entry with `jobs.incremental.ledger.plan_run` and the config's `input` window and caps; the dedup job, started
with `--incremental` and the same run id, then reads exactly those files. Answers
`{"files": N, "bytes": B, "entry": E, "reused": bool, "backlogFiles": K, "message": …}`; `files` is 0 when there
is nothing to do. A run that may not start raises `IncrementalRunError` (the execution's error, with the
reason as its cause). Needs boto3 only (in the Lambda runtime): no Spark.
"""

from __future__ import annotations

from typing import Any

from jobs.config import load_config
from jobs.incremental.ledger import NothingToDo, plan_run
from jobs.incremental.window import window_from


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    config = load_config(event["config"])
    try:
        plan = plan_run(event["input"], event["output"], event["runId"], window_from(config.input))
    except NothingToDo as nothing:
        return {"files": 0, "bytes": 0, "entry": None, "reused": False, "backlogFiles": 0, "message": str(nothing)}
    summary = plan.summary()
    message = (
        f"run {plan.run_id} reads {summary['files']} file(s), {summary['bytes']:,} bytes (ledger entry {plan.entry})"
    )
    return {
        "files": summary["files"],
        "bytes": summary["bytes"],
        "entry": plan.entry,
        "reused": plan.reused,
        "backlogFiles": plan.backlog_files,
        "message": message,
    }
