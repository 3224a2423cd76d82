"""Render synthesized CloudFormation values as plain data, intrinsics resolved to realistic sample values.

The validators check what would be deployed: an IAM policy's resources as ARNs (parliament matches them against
each action's resource types), a state machine's definition as ASL. One environment's templates are rendered
together, so a cross-stack reference (`Fn::GetStackOutput`, `Fn::ImportValue`) renders as the value its stack
outputs, and a reference to a resource as what CloudFormation would return for its type (a bucket's name, a
queue's URL, a role's ARN), built from the resource's own name property when it has one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
REGION = "eu-west-1"
PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": URL_SUFFIX,
    "AWS::NoValue": "",
}


@dataclass(frozen=True)
class ResourceKind:
    """How CloudFormation names one resource type: its name property, its ARN, what `Ref` returns."""

    name_property: str | None
    arn: str
    """ARN pattern: `{region}`, `{account}` and `{name}` filled in."""
    ref: str = "name"
    """`Ref` returns the `name`, the `arn` or the `url` (SQS)."""


KINDS = {
    "AWS::S3::Bucket": ResourceKind("BucketName", "arn:aws:s3:::{name}"),
    "AWS::SQS::Queue": ResourceKind("QueueName", "arn:aws:sqs:{region}:{account}:{name}", ref="url"),
    "AWS::SNS::Topic": ResourceKind("TopicName", "arn:aws:sns:{region}:{account}:{name}", ref="arn"),
    "AWS::IAM::Role": ResourceKind("RoleName", "arn:aws:iam::{account}:role/{name}"),
    "AWS::IAM::ManagedPolicy": ResourceKind("ManagedPolicyName", "arn:aws:iam::{account}:policy/{name}", ref="arn"),
    "AWS::Lambda::Function": ResourceKind("FunctionName", "arn:aws:lambda:{region}:{account}:function:{name}"),
    "AWS::Lambda::LayerVersion": ResourceKind("LayerName", "arn:aws:lambda:{region}:{account}:layer:{name}:1", "arn"),
    "AWS::Logs::LogGroup": ResourceKind("LogGroupName", "arn:aws:logs:{region}:{account}:log-group:{name}:*"),
    "AWS::DynamoDB::Table": ResourceKind("TableName", "arn:aws:dynamodb:{region}:{account}:table/{name}"),
    "AWS::StepFunctions::StateMachine": ResourceKind(
        "StateMachineName", "arn:aws:states:{region}:{account}:stateMachine:{name}", ref="arn"
    ),
    "AWS::EMRServerless::Application": ResourceKind(
        None, "arn:aws:emr-serverless:{region}:{account}:/applications/{name}"
    ),
    "AWS::Scheduler::Schedule": ResourceKind("Name", "arn:aws:scheduler:{region}:{account}:schedule/default/{name}"),
    "AWS::CloudWatch::Alarm": ResourceKind("AlarmName", "arn:aws:cloudwatch:{region}:{account}:alarm:{name}"),
}
"""The types the pipeline's templates refer to; any other renders as `arn:aws:<service>:…:<logical id>`."""

GETATT_NAMES = {
    "QueueName",
    "TopicName",
    "RoleId",
    "Name",
    "ApplicationId",
    "FunctionName",
    "LogGroupName",
    "StateMachineName",
}
"""Attributes that are the resource's name (or id) rather than its ARN."""

SUB_VARIABLE = re.compile(r"\$\{([^!}][^}]*)\}")


class RenderError(ValueError):
    """A value the renderer cannot resolve (an unknown intrinsic, a reference to nothing)."""


@dataclass(frozen=True)
class StackTemplate:
    """One synthesized template: its stack name (from the file name) and its body."""

    name: str
    path: Path
    body: dict[str, Any]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        resources: dict[str, dict[str, Any]] = self.body.get("Resources", {})
        return resources


def load(paths: Iterable[Path]) -> list[StackTemplate]:
    """`<stack>.template.json` files, as written by `cdk synth`."""
    templates = []
    for path in paths:
        if not path.name.endswith(".template.json"):
            raise RenderError(f"template file {path}: allowed are cdk.out's `<stack>.template.json` files")
        body = json.loads(path.read_text(encoding="utf-8"))
        templates.append(StackTemplate(path.name.removesuffix(".template.json"), path, body))
    return templates


class Renderer:
    """Renders values of an environment's templates (resolving cross-stack references among them)."""

    def __init__(self, templates: Iterable[StackTemplate]) -> None:
        self.stacks = {template.name: template for template in templates}

    def render(self, stack: StackTemplate, value: Any) -> Any:
        """`value` of `stack` as plain data: every intrinsic function resolved."""
        if isinstance(value, list):
            return [self.render(stack, item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref" or key.startswith("Fn::"):
                return self._intrinsic(stack, key, argument)
        return {key: self.render(stack, item) for key, item in value.items()}

    def _intrinsic(self, stack: StackTemplate, function: str, argument: Any) -> Any:
        if function == "Ref":
            return self.ref(stack, str(argument))
        if function == "Fn::GetAtt":
            logical_id, attribute = argument if isinstance(argument, list) else str(argument).split(".", 1)
            return self.get_att(stack, logical_id, attribute)
        if function == "Fn::Join":
            separator, parts = argument
            return str(separator).join(str(part) for part in self.render(stack, parts))
        if function == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            return self._sub(stack, text, self.render(stack, variables))
        if function == "Fn::Select":
            index, items = self.render(stack, argument)
            return items[int(index)]
        if function == "Fn::Split":
            separator, text = self.render(stack, argument)
            return str(text).split(separator)
        if function == "Fn::GetStackOutput":
            return self.output(argument["StackName"], argument["OutputName"])
        if function == "Fn::ImportValue":
            return self.export(str(self.render(stack, argument)))
        raise RenderError(
            f"{stack.name}: intrinsic {function} {json.dumps(argument)[:80]}: allowed are Ref, Fn::GetAtt, Fn::Join, "
            "Fn::Sub, Fn::Select, Fn::Split, Fn::GetStackOutput, Fn::ImportValue"
        )

    def ref(self, stack: StackTemplate, name: str) -> str:
        """What `Ref` returns: a pseudo parameter, a parameter's default, or the resource's name, ARN or URL."""
        if name in PSEUDO:
            return PSEUDO[name]
        parameter = stack.body.get("Parameters", {}).get(name)
        if parameter is not None:
            return str(parameter.get("Default", name))
        kind, resource_name = self._resource(stack, name)
        if kind.ref == "arn":
            return self._arn(kind, resource_name)
        if kind.ref == "url":
            return f"https://sqs.{REGION}.{URL_SUFFIX}/{ACCOUNT}/{resource_name}"
        return resource_name

    def get_att(self, stack: StackTemplate, logical_id: str, attribute: str) -> str:
        """`Fn::GetAtt`: the ARN (`Arn`, `…Arn`), a queue's URL, or else the resource's name or id."""
        kind, resource_name = self._resource(stack, logical_id)
        if attribute == "QueueUrl":
            return f"https://sqs.{REGION}.{URL_SUFFIX}/{ACCOUNT}/{resource_name}"
        if attribute in GETATT_NAMES:
            return resource_name
        if attribute.endswith("Arn"):
            return self._arn(kind, resource_name)
        return f"{logical_id}-{attribute}"

    def output(self, stack_name: str, output_name: str) -> Any:
        """The value of another stack's output, rendered in that stack."""
        producer = self.stacks.get(stack_name)
        if producer is None:
            raise RenderError(f"output {output_name} of stack {stack_name}: allowed stacks are {sorted(self.stacks)}")
        outputs = producer.body.get("Outputs", {})
        if output_name not in outputs:
            raise RenderError(f"output {output_name} of stack {stack_name}: it has {sorted(outputs)}")
        return self.render(producer, outputs[output_name]["Value"])

    def export(self, export_name: str) -> Any:
        """The value of the output exported as `export_name` by one of the stacks."""
        for producer in self.stacks.values():
            for output in producer.body.get("Outputs", {}).values():
                if self.render(producer, output.get("Export", {}).get("Name")) == export_name:
                    return self.render(producer, output["Value"])
        raise RenderError(f"import {export_name}: no stack of {sorted(self.stacks)} exports it")

    def _resource(self, stack: StackTemplate, logical_id: str) -> tuple[ResourceKind, str]:
        resource = stack.resources.get(logical_id)
        if resource is None:
            raise RenderError(f"{stack.name}: reference to {logical_id}, which is no resource or parameter of it")
        type_name = str(resource["Type"])
        service = type_name.split("::")[1].lower() if type_name.count("::") == 2 else "custom"
        kind = KINDS.get(type_name, ResourceKind(None, f"arn:aws:{service}:{{region}}:{{account}}:{{name}}"))
        properties = resource.get("Properties", {})
        given = properties.get(kind.name_property) if kind.name_property else None
        if given is not None:
            return kind, str(self.render(stack, given))
        # CloudFormation generates a name from the stack and logical id (S3: lowercase only).
        generated = f"{stack.name}-{logical_id}"
        return kind, generated.lower() if type_name == "AWS::S3::Bucket" else generated

    @staticmethod
    def _arn(kind: ResourceKind, name: str) -> str:
        return kind.arn.format(region=REGION, account=ACCOUNT, name=name)

    def _sub(self, stack: StackTemplate, text: str, variables: dict[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and name not in PSEUDO:
                logical_id, attribute = name.split(".", 1)
                return self.get_att(stack, logical_id, attribute)
            return self.ref(stack, name)

        return SUB_VARIABLE.sub(replace, text).replace("${!", "${")


def substitute(text: str, substitutions: dict[str, Any]) -> str:
    """A state machine's `DefinitionString` with its (rendered) `DefinitionSubstitutions` put in."""
    return SUB_VARIABLE.sub(lambda match: str(substitutions.get(match.group(1), match.group(0))), text)
