# Winnow: `make demo` and `make test` set everything up on a fresh machine, then run.
.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV := .venv
PY := $(abspath $(VENV))/bin/python
DEMO := demo
DEMO_EVENTS ?= 100000

# Spark in local mode: listen on loopback only, and run Python workers with the venv's interpreter.
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: help setup demo test test-fast lint fmt clean bench docs audit-setup

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# The jobs' runtime first (requirements.txt): the class archive is built from it while the rest of the dev venv
# installs (that install finds every runtime pin already satisfied and leaves it as it is).
$(VENV)/.runtime: requirements.txt
	@command -v java >/dev/null || { echo "Java 17 is missing: installing openjdk-17-jre-headless"; \
		apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --no-compile --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed: $(VENV)/.runtime requirements-dev.txt requirements-cdk.txt
	$(PY) -m pip install -q --no-compile --disable-pip-version-check -r requirements-dev.txt
	touch $@

# Spark's classes archived once for the JVMs local jobs start (jobs/runtime/class_archive.py): they start and plan
# sooner. A failed build is said and skipped: jobs then start without it.
$(VENV)/.class-archive: $(VENV)/.runtime
	-$(PY) -m jobs.tools.build_class_archive
	touch $@

setup: $(VENV)/.installed $(VENV)/.class-archive ## create .venv from the pinned requirements, then the class archive (once)

demo: setup ## two batches of sample events through the pipeline (dedup + shred, embedded manifest), then the report
	rm -rf $(DEMO)
	$(PY) -m jobs generate --output $(DEMO)/input --events $(DEMO_EVENTS) --batches 2 --seed 7
	$(PY) -m jobs run --input $(DEMO)/input/batch=1 --output $(DEMO)/output --config configs/local.json \
		--manifest sqlite:$(DEMO)/manifest.db --create --run-id 2026-11-22-03-00-00
	$(PY) -m jobs run --input $(DEMO)/input/batch=2 --output $(DEMO)/output --config configs/local.json \
		--manifest sqlite:$(DEMO)/manifest.db --run-id 2026-11-22-04-00-00
	$(PY) -m jobs report --input $(DEMO)/input --output $(DEMO)/report \
		--deduplicated $(DEMO)/output/deduplicated/run=2026-11-22-03-00-00 $(DEMO)/output/deduplicated/run=2026-11-22-04-00-00

# Test processes (pytest-xdist), each module's tests on one of them (its module fixtures built once), every CDK module
# on the same one (each environment synthesized once), the costliest first (tests/conftest.py `work_unit`). Not
# `--dist loadgroup`: with pytest 9.2 it no longer groups (pytest-xdist#1386).
TEST_WORKERS ?= 2

# The dev venv, the class archive (once the jobs' runtime is in), the validators' venv and node_modules are built side
# by side.
test: ## run the whole test suite (TEST_WORKERS processes)
	$(MAKE) --no-print-directory -j4 setup audit-setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

test-fast: setup ## the quick loop: no Spark, no CDK synth, no template validators, nothing slow (pyproject.toml)
	$(PY) -m pytest -m "not spark and not synth and not audit and not slow"

# The template validators parliament and checkov, in a venv of their own: their pins conflict with the dev venv's
# (requirements-audit.txt says how). asl-validator comes with node_modules (package.json).
AUDIT_VENV := .venv-audit

$(AUDIT_VENV)/.installed: requirements-audit.txt
	python3 -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/python -m pip install -q --no-compile --no-deps --disable-pip-version-check -r requirements-audit.txt
	touch $@

audit-setup: $(AUDIT_VENV)/.installed node_modules/.installed ## install the template validators (asl-validator, parliament, checkov)

$(VENV)/.bench-installed: $(VENV)/.installed requirements-bench.txt
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-bench.txt
	touch $@

bench: $(VENV)/.bench-installed ## benchmarks (not in CI; over an hour): bench/results.json, bench/RESULTS.md, the tables of docs/benchmarks.md
	$(PY) -m bench $(BENCH_ARGS)

$(VENV)/.docs-installed: $(VENV)/.installed requirements-docs.txt
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-docs.txt
	touch $@

docs: $(VENV)/.docs-installed ## build the documentation site (docs/, mkdocs.yml) into site/; a broken link or anchor fails
	$(PY) -m mkdocs build --strict --site-dir site

lint: setup ## ruff and mypy
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

fmt: setup ## format the code
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean: ## remove the demo output and caches (keeps .venv)
	rm -rf $(DEMO) .pytest_cache .mypy_cache .ruff_cache spark-warehouse

# ----------------------------------------------------------------------------------------------------------
# Infrastructure: build the job artifacts, then synth / diff / deploy / destroy one environment with the
# pinned CDK CLI (package.json). ENV picks configs/<ENV>.json; dev is the default, prod is typed explicitly.
ENV ?= dev
CDK := npx --no-install cdk --app "$(PY) app.py"
CDK_FLAGS := -c env=$(ENV) --no-notices
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: cdk-install package synth synth-all diff deploy destroy test-infra

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

cdk-install: node_modules/.installed ## install the pinned CDK CLI (aws-cdk 2.1148.1) into node_modules

package: setup ## build the job artifacts into dist/package (jobs zip, dependencies, entry point)
	$(PY) -m scripts.package_jobs --out dist/package

# The built artifacts run as EMR and Lambda run them, in fresh venvs cached under dist/rehearsal/ (docs/deploy.md).
.PHONY: rehearse
rehearse: package ## run the built artifacts in fresh venvs as EMR and Lambda would: dedup, shred, the input planner; then on a local standalone cluster
	$(PY) -m scripts.rehearse_artifacts --env $(ENV)

synth: setup cdk-install audit-setup package ## synthesize ENV's stacks, cdk-nag, cfn-lint and the template validators included (make synth ENV=prod)
	$(CDK) synth $(CDK_FLAGS) --quiet
	$(abspath $(VENV))/bin/cfn-lint --non-zero-exit-code error -- cdk.out/Winnow-$(ENV)-*.template.json
	$(PY) -m scripts.validate_templates cdk.out/Winnow-$(ENV)-*.template.json

synth-all: ## synthesize every environment (as CI does)
	$(MAKE) synth ENV=dev
	$(MAKE) synth ENV=prod

diff: setup cdk-install package ## show what a deploy of ENV would change (needs AWS credentials)
	$(CDK) diff --all $(CDK_FLAGS)

# First stop the EMR application if it is idle (EMR refuses to update a started one), or stop here while it runs
# jobs. --force: every stack is deployed even when its template is unchanged, so the Orchestration stack reads
# the Processing stack's outputs again (weak references: a replaced application or role reaches the state machine).
deploy: setup cdk-install package ## deploy ENV: code, config and infrastructure together (needs AWS credentials)
	$(PY) -m scripts.quiesce_application --env $(ENV)
	$(CDK) deploy --all --force $(CDK_FLAGS) --require-approval $(if $(filter prod,$(ENV)),broadening,never)

destroy: setup cdk-install ## delete ENV's stacks (prod keeps its data: see README "Deploy")
	$(CDK) destroy --all $(CDK_FLAGS)

test-infra: setup audit-setup ## the infrastructure tests only (synth, IAM, cdk-nag, cfn-lint, state machine in moto)
	$(PY) -m pytest tests/infra
