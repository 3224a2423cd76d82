"""Run `keyed` or `table` on the deployed EMR Serverless application: the `start-job-run` request, from the config.

    python -m scripts.job_run --env dev -- keyed --input s3://<input>/enriched/orders/ \\
        --output s3://<output>/keyed/orders/runs --state s3://<output>/keyed/orders/state --format jsonl --key id
    python -m scripts.job_run --env dev --start -- table insert --table s3://<output>/tables/orders ...

The arguments after `--` are the job's own command line (`python -m jobs keyed|table …`); they are parsed by
the jobs' parser before anything is started. The deployed config is added (`--config`), and `keyed` gets a run
id (`--run-id`, now) unless given. The application, job role, entry point and Spark settings come from the
Processing stack's outputs (the deployed artifacts version). Every `s3://` path must lie where the job role may
go: the input bucket under `storage.input_prefix`, or the output bucket under `keyed/` or `tables/`; else the
command stops with one line before it starts anything. Without `--start` it prints the equivalent
`aws emr-serverless start-job-run` command; with `--start` it starts the job run and prints its id.
(`dedup` and `shred` run through the pipeline state machine.)
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

GENERIC_JOBS = ("keyed", "table")
STACK_OUTPUTS = ("ApplicationId", "JobRoleArn", "EntryPoint", "SparkSubmitParameters", "ConfigUri", "OutputBucketName")


class JobRunError(Exception):
    """The requested job run cannot be started as given (one line, exit 2)."""


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The Processing stack's outputs this script needs.

    Raises:
        JobRunError: the stack is not deployed, or lacks an output (deployed before this script existed).
    """
    try:
        (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except cloudformation.exceptions.ClientError as err:
        raise JobRunError(f"stack {stack}: {err.response['Error']['Message']}; deploy it first (make deploy)") from None
    outputs = {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}
    missing = [key for key in STACK_OUTPUTS if key not in outputs]
    if missing:
        raise JobRunError(f"stack {stack} has no output {', '.join(missing)}; deploy the current version (make deploy)")
    return outputs


def allowed_prefixes(input_bucket: str, input_prefix: str, output_bucket: str) -> list[str]:
    return [f"s3://{input_bucket}/{input_prefix}", f"s3://{output_bucket}/keyed/", f"s3://{output_bucket}/tables/"]


def job_arguments(argv: Sequence[str], config_uri: str, run_id: str, allowed: Sequence[str]) -> list[str]:
    """The job's command line as the entry point gets it: checked, with the deployed config and a run id.

    Raises:
        JobRunError: not keyed or table, not a valid command line, or an s3:// path the job role cannot reach.
    """
    from jobs.runtime.cli import build_parser

    if not argv or argv[0] not in GENERIC_JOBS:
        raise JobRunError(
            f"job: given {argv[0] if argv else 'nothing'!r}; allowed: {', '.join(GENERIC_JOBS)} (dedup and shred run "
            "through the pipeline state machine)"
        )
    arguments = list(argv)
    if "--config" not in arguments:
        arguments += ["--config", config_uri]
    if argv[0] == "keyed" and "--run-id" not in arguments:
        arguments += ["--run-id", run_id]
    try:
        build_parser().parse_args(arguments)
    except SystemExit:
        raise JobRunError(
            f"the job's arguments do not parse: {shlex.join(argv)} (see python -m jobs {argv[0]} --help)"
        ) from None
    for value in arguments:
        if value.startswith(("s3://", "s3a://")) and value != config_uri:
            folder = value.rstrip("/") + "/"
            if not any(folder.startswith(prefix) for prefix in allowed):
                raise JobRunError(
                    f"{value}: the job role cannot write or read there; allowed: paths under {', '.join(allowed)}"
                )
    return arguments


def start_job_run_request(
    outputs: Mapping[str, str], arguments: Sequence[str], timeout_minutes: int, name: str
) -> dict[str, Any]:
    """The EMR Serverless StartJobRun request (boto3 names)."""
    return {
        "applicationId": outputs["ApplicationId"],
        "executionRoleArn": outputs["JobRoleArn"],
        "name": name,
        "executionTimeoutMinutes": timeout_minutes,
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": outputs["EntryPoint"],
                "entryPointArguments": list(arguments),
                "sparkSubmitParameters": outputs["SparkSubmitParameters"],
            }
        },
        "tags": {"job": arguments[0]},
    }


def cli_command(request: Mapping[str, Any]) -> str:
    """The same request as an `aws emr-serverless start-job-run` command."""
    return shlex.join(
        [
            "aws", "emr-serverless", "start-job-run",
            "--application-id", request["applicationId"],
            "--execution-role-arn", request["executionRoleArn"],
            "--name", request["name"],
            "--execution-timeout-minutes", str(request["executionTimeoutMinutes"]),
            "--job-driver", json.dumps(request["jobDriver"], separators=(",", ":")),
        ]
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.job_run", description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="the environment (configs/<env>.json)")
    parser.add_argument("--start", action="store_true", help="start the job run (default: print the command)")
    parser.add_argument("job", nargs=argparse.REMAINDER, help="-- keyed|table …: the job's command line")
    args = parser.parse_args(argv)
    job = args.job[1:] if args.job[:1] == ["--"] else args.job

    import boto3

    from cdk.config import load_config
    from cdk.naming import resource_names
    from cdk.pipeline import stack_name
    from jobs.fs.runs import new_run_id

    config = load_config(args.env)
    try:
        outputs = stack_outputs(
            boto3.client("cloudformation", region_name=config.region), stack_name(args.env, "Processing")
        )
        account = outputs["JobRoleArn"].split(":")[4]
        names = resource_names(config, account)
        run_id = new_run_id()
        arguments = job_arguments(
            job,
            outputs["ConfigUri"],
            run_id,
            allowed_prefixes(names.input_bucket, config.storage.input_prefix, outputs["OutputBucketName"]),
        )
        request = start_job_run_request(outputs, arguments, config.emr.job_timeout_minutes, f"{job[0]}-{run_id}")
    except JobRunError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.start:
        print(cli_command(request))
        return 0
    started = boto3.client("emr-serverless", region_name=config.region).start_job_run(**request)
    print(f"started {request['name']}: job run {started['jobRunId']} on application {started['applicationId']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
