"""`make rehearse`: run the built job artifacts (dist/package) the way EMR Serverless and Lambda run them, each in a
fresh venv that holds only what that runtime provides. A module the artifacts import but do not carry then fails
here instead of on EMR.

What is submitted comes from the CDK constructs themselves (rendered for a fake account, nothing deployed): the job
runs' EntryPoint and SparkSubmitParameters, the dedup and shred command lines of the state machine, and the
planner's event. Only what a local machine cannot have is changed:
- the artifacts' S3 URIs (entry point, `--py-files`, `spark.archives`) name a copy of the build in a temp dir;
- the data buckets (input, output, lake manifest) are folders in that temp dir: Spark here has no S3 filesystem;
- `spark.emr-serverless.driverEnv.*` settings become the driver's environment, and the archive is unpacked in the
  driver's working dir as EMR does (`./deps`); the EMR Python (`emr.python`) is the venv's Python;
- the job config, the Iglu resolver config and schemas (read with boto3 from the `deps` archive), the DynamoDB
  manifest and the planner's buckets are on a moto server on 127.0.0.1, reached through `AWS_ENDPOINT_URL`;
- the master is `local[2]`.

Then the probe, dedup and shred run again on a Spark standalone cluster the rehearsal starts on 127.0.0.1 (a master
and two workers of the venv's pyspark, one core each, each in its own folder under the temp dir, stopped when done
whatever happens), against moto reset and deployed to anew: executors run in JVMs and Python workers of their own,
and get the fake credentials, the region and moto's endpoint only through `spark.executorEnv.*` (the daemons'
environment has none), as an instance role and the Region's endpoints give them on EMR; the deployment's executor
size becomes one a worker has (1 core, 768m). The probe must show the executor importing `jobs` and `boto3` from the
copies Spark shipped to a worker's folder, and the AWS settings in its environment; the outputs (the sorted lines of
every output folder) and the summary counts must be local[2]'s, whose outputs are set aside first so that the
cluster run writes to the same paths. Last, dedup runs once more on the cluster as the state machine submits it with
`manifest.backend` lake (the lake manifest a folder of the manifest bucket's), and its outputs and counts must be
those of local[2]'s dedup against DynamoDB.

Every job runs with `env -i` style environments (PATH without the checkout, HOME, JAVA_HOME if set, fake AWS
credentials) from a working dir outside the checkout; a probe job first checks where the driver and an executor
import `jobs`, `boto3` and `pyspark` from, and that no path of the checkout is on their `sys.path`.

The venvs are cached under dist/rehearsal/ (keyed by Python, pyspark and boto3 version), the step logs written to
dist/rehearsal/logs/.

The modules (the entry point is scripts/rehearse_artifacts.py):
- `deployment`: what CDK deploys, rendered from the constructs (Step Functions' parameters evaluated), and put
  into moto;
- `workspace`: the temp dir, and the deployment's spark-submit command lines made local in it (for local[2] or
  the cluster);
- `cluster`: the standalone cluster, started and stopped;
- `environment`: the fresh venvs and the clean environments the jobs and the planner run in;
- `moto_server`: moto on 127.0.0.1, one request at a time (the tests' loopback DynamoDB uses it too);
- `checks`: the probe and planner scripts, and what their answers, the jobs' summaries and the cluster's outputs
  must show;
- `steps`: the named steps, the logged commands, and the error that says which step failed;
- `run`: the rehearsal's steps in order, and the command line.
This module imports nothing, so importing `moto_server` alone stays light.
"""
