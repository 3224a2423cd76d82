"""The code's layers, read from its imports (the AST, so lazy imports inside functions count too).

`jobs/` is layered: a module imports only from its own layer or the layers below, and no import cycle exists.
`cdk/` builds on three modules of `jobs/` only: names and checks the infrastructure shares with the jobs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A package (or module) imports only from its own row or the rows above it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("jobs", "jobs.errors", "jobs.contract"),  # `jobs` itself: `__version__` only
    ("jobs.fs", "jobs.enriched", "jobs.iglu"),
    ("jobs.config",),
    ("jobs.manifest", "jobs.incremental"),
    ("jobs.runtime",),
    ("jobs.dedup", "jobs.shred", "jobs.keyed", "jobs.tables", "jobs.tools"),
    ("jobs.commands", "jobs.entrypoints", "jobs.__main__"),
)
CDK_MAY_IMPORT = {"jobs.config", "jobs.contract", "jobs.errors"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> Iterator[str]:
    """The `jobs` modules a file imports: `from jobs.x import y` gives `jobs.x.y` when that is a module."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "jobs")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "jobs":
            assert node.level == 0, f"{path}: relative import"
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                target = ROOT / submodule.replace(".", "/")
                yield (
                    submodule
                    if target.with_suffix(".py").exists() or (target / "__init__.py").exists()
                    else node.module
                )


def jobs_graph() -> dict[str, set[str]]:
    return {module_name(path): set(imported(path)) for path in sorted((ROOT / "jobs").rglob("*.py"))}


def layer_of(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, row in enumerate(LAYERS)
        for prefix in row
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} is in no layer of LAYERS: add its package to a row"
    return max(matches)[1]


def test_every_jobs_module_imports_only_its_own_layer_or_lower() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in jobs_graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_jobs_has_no_import_cycle() -> None:
    graph = jobs_graph()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join((*path[path.index(module) :], module)))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())


def test_cdk_imports_only_the_contract_the_config_and_the_errors_of_jobs() -> None:
    imports = {
        f"{path.relative_to(ROOT)}: {target}"
        for path in [*sorted((ROOT / "cdk").rglob("*.py")), ROOT / "app.py"]
        for target in imported(path)
        if target not in CDK_MAY_IMPORT
    }
    assert imports == set()


def test_no_two_jobs_modules_share_a_name_for_different_things() -> None:
    """`commands/NAME.py` is the command of NAME, and each job package's `job.py` its job: those names repeat."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "jobs").rglob("*.py"):
        relative = path.relative_to(ROOT / "jobs")
        if relative.name not in ("__init__.py", "job.py") and relative.parts[0] != "commands":
            names.setdefault(relative.name, []).append(str(relative))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
