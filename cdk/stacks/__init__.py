"""The stacks, split by lifecycle: Storage (stateful), Processing (EMR + artifacts), Orchestration (runs)."""
