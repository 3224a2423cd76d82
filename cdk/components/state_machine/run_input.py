"""The run input: the execution input merged over its defaults, the run id worked out from the scheduled time, and
the static settings every later state reads."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

RUN_ID_DELIMITERS = "-T:.Z"
"""Splitting an ISO 8601 UTC time (`2026-11-22T03:00:00.123Z`) on these characters gives its date and time fields."""


@dataclass(frozen=True, kw_only=True)
class RunInputProps:
    """Props of `RunInput`. S3 prefixes end in '/'; URIs are `s3://…`."""

    input_bucket_name: str
    """Where the enriched input lies."""
    input_prefix: str
    """Default input prefix (an execution input may name another one under it)."""
    output_bucket_name: str
    """Where both jobs write: dedup under `dedup_prefix`, shred under `shred_prefix`."""
    dedup_prefix: str
    shred_prefix: str
    config_uri: str
    """The deployed job config."""
    manifest_uri: str
    """The events manifest dedup checks (`dynamodb://<table>` or `lake:s3://<bucket>/<prefix>`)."""


class RunInput(Construct):
    """`Defaults` → `MergeInput` → `RunIdFromTime` → `Run` (`start` to `end`).

    After `Run` the data is `given` (the execution input as given), `execution` (its name), `runDefaults` (the
    run id worked out from `scheduledTime`), `run` (`runId`, `scheduledTime`, `inputPrefix`: the input merged over
    the defaults) and `settings` (buckets, outputs, config and manifest).
    """

    def __init__(self, scope: Construct, construct_id: str, props: RunInputProps) -> None:
        super().__init__(scope, construct_id)
        jp = sfn.JsonPath
        # Defaults first, the execution input merged over them (JsonMerge: the second object wins). The input
        # as given travels along: a hand-over passes it on unchanged.
        carried: dict[str, object] = {"given": jp.object_at("$.given"), "execution": jp.string_at("$.execution")}
        defaults = sfn.Pass(
            self,
            "Defaults",
            parameters={
                "given": jp.entire_payload,
                "execution": jp.execution_name,
                "defaults": {"scheduledTime": jp.execution_start_time, "inputPrefix": props.input_prefix},
            },
        )
        merge = sfn.Pass(
            self,
            "MergeInput",
            parameters={**carried, "run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.given"))},
        )
        fields = [
            jp.array_get_item(jp.string_split(jp.string_at("$.run.scheduledTime"), RUN_ID_DELIMITERS), i)
            for i in range(6)
        ]
        run_id = sfn.Pass(
            self,
            "RunIdFromTime",
            parameters={
                **carried,
                "run": jp.object_at("$.run"),
                "defaults": {"runId": jp.format("{}-{}-{}-{}-{}-{}", *fields)},
            },
        )
        run = self._run(props, carried)
        defaults.next(merge).next(run_id).next(run)
        self.start: sfn.State = defaults
        """`Defaults`: the state machine's first state."""
        self.end: sfn.Pass = run
        """`Run`: go on from it with `end.next(…)`."""

    def _run(self, props: RunInputProps, carried: dict[str, object]) -> sfn.Pass:
        """The run (the defaults, the run id included, with the input merged over them) and the settings."""
        jp = sfn.JsonPath
        # Static settings travel as data: intrinsic functions then never hold CloudFormation tokens.
        return sfn.Pass(
            self,
            "Run",
            parameters={
                **carried,
                "runDefaults": jp.object_at("$.defaults"),
                "run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.run")),
                "settings": {
                    "inputBucket": props.input_bucket_name,
                    "dedupOutput": f"s3://{props.output_bucket_name}/{props.dedup_prefix.rstrip('/')}",
                    "shredOutput": f"s3://{props.output_bucket_name}/{props.shred_prefix.rstrip('/')}",
                    "config": props.config_uri,
                    "manifest": props.manifest_uri,
                },
            },
        )
