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

.PHONY: help setup demo test test-fast lint fmt clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@command -v java >/dev/null || { echo "Java 17 is missing: installing openjdk-17-jre-headless"; \
		apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed ## create .venv from the pinned requirements (once)

demo: setup ## generate sample events and deduplicate them locally (embedded manifest)
	rm -rf $(DEMO)
	$(PY) -m jobs generate --output $(DEMO)/input --events $(DEMO_EVENTS) --seed 7
	$(PY) -m jobs dedup --input $(DEMO)/input --output $(DEMO)/output --config configs/local.json \
		--run-id 2026-11-22-03-00-00

test: setup ## run the whole test suite
	$(PY) -m pytest

test-fast: setup ## the tests that need no Spark
	$(PY) -m pytest -m "not spark"

lint: setup ## ruff and mypy
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

fmt: setup ## format the code
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean: ## remove the demo output and caches (keeps .venv)
	rm -rf $(DEMO) .pytest_cache .mypy_cache .ruff_cache spark-warehouse
