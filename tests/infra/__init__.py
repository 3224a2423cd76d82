"""Tests of the infrastructure (cdk/, app.py, packaging, entrypoints): synth, assertions, nag, lint, flow."""
