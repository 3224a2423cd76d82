"""Every path the jobs hand to Spark goes through `jobs.fs.paths`, read from the code (the AST: no Spark, fast).

Spark's reader takes a Hadoop glob (`orders[1]` reads `orders1`), its writer takes a name, and a SQL table's
location is a string literal that an unpartitioned table globs: one function for each (`jobs/fs/paths.py`), and a
call that names a path any other way fails here, wherever it is in `jobs/`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

IO_METHODS = {"parquet", "text", "csv", "json", "orc", "load", "save"}
"""DataFrameReader / DataFrameWriter methods that take paths."""
READ_MARKS = {"read", "readStream"}
WRITE_MARKS = {"write", "writeStream", "partitionBy", "bucketBy", "insertInto", "saveAsTable"}
NOT_SPARK = {"json", "pickle", "yaml", "tomllib", "marshal"}
"""Modules whose `load`/`json` are no Spark calls (`json.load(handle)`)."""
WRAPPER = {"read": "exact", "write": "written"}
PATH_OPTIONS = {"path": "exact", "basePath": "qualified"}
LOCATION_IN_SQL = re.compile(r"\bLOCATION\s*(['\"]|$)")
"""`LOCATION '…'`, or `LOCATION ` before a value put in (the docstring words `KIND LOCATION)` are no SQL)."""


def called(node: ast.AST) -> str | None:
    """The name of the function a call node calls (`exact(p)` and `paths.exact(p)` give `exact`)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def wrapped(arg: ast.expr, wrapper: str) -> bool:
    """True when `arg` is `wrapper(…)`, or a starred/list/generator whose every element is."""
    if isinstance(arg, ast.Starred):
        return wrapped(arg.value, wrapper)
    if isinstance(arg, ast.List | ast.Tuple):
        return bool(arg.elts) and all(wrapped(element, wrapper) for element in arg.elts)
    if isinstance(arg, ast.GeneratorExp | ast.ListComp):
        return wrapped(arg.elt, wrapper)
    return called(arg) == wrapper


def chain(node: ast.expr) -> Iterator[str]:
    """The attribute names along a call chain, outermost first (`spark.read.option(…).csv` gives csv, option,
    read)."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            yield node.attr
            node = node.value
        else:
            return


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def kind_of(receiver: ast.expr, bindings: dict[str, ast.expr], depth: int = 0) -> str | None:
    """'read' or 'write' for a reader's or writer's chain; a name bound in the function is followed."""
    names = set(chain(receiver))
    if names & READ_MARKS:
        return "read"
    if names & WRITE_MARKS:
        return "write"
    name = root_name(receiver)
    if name in bindings and depth < 5:
        return kind_of(bindings[name], bindings, depth + 1)
    return None


def problems_in(source: str, filename: str) -> list[str]:
    """Every call in `source` that hands Spark a path other than through `jobs.fs.paths`."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    scopes = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        bindings = {
            target.id: node.value
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        body = scope.body if isinstance(scope, ast.Module) else [scope]
        for node in (inner for statement in body for inner in ast.walk(statement)):
            found += _call_problems(node, bindings, filename)
    found += _sql_problems(tree, filename)
    return sorted(set(found))


def _call_problems(node: ast.AST, bindings: dict[str, ast.expr], filename: str) -> list[str]:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return []
    method, receiver, where = node.func.attr, node.func.value, f"{filename}:{node.lineno}"
    if method == "globStatus":
        return [f"{where}: globStatus reads names as patterns; list with listStatus"]
    if method == "option" and len(node.args) == 2 and isinstance(node.args[0], ast.Constant):
        wrapper = PATH_OPTIONS.get(str(node.args[0].value))
        if wrapper and not wrapped(node.args[1], wrapper):
            return [f"{where}: option {node.args[0].value!r} not given as {wrapper}(…)"]
        return []
    if method not in IO_METHODS or not node.args or root_name(receiver) in NOT_SPARK:
        return []
    kind = kind_of(receiver, bindings)
    if kind is None:
        return [f"{where}: .{method}(…) on something neither a Spark reader nor writer as far as this check sees"]
    bad = [arg for arg in node.args if not wrapped(arg, WRAPPER[kind])]
    return [f"{where}: {kind}er .{method}(…) given a path not as {WRAPPER[kind]}(…)"] if bad else []


def _sql_problems(tree: ast.AST, filename: str) -> list[str]:
    """A SQL table's location is `location(…)`, and a table at a location has `table_options(…)`."""
    found = []
    inside = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if id(node) in inside or not isinstance(node, ast.JoinedStr | ast.Constant):
            continue
        parts = node.values if isinstance(node, ast.JoinedStr) else [node]
        texts = [part.value for part in parts if isinstance(part, ast.Constant) and isinstance(part.value, str)]
        calls = {called(part.value) for part in parts if isinstance(part, ast.FormattedValue)}
        where, text = f"{filename}:{node.lineno}", "".join(texts)
        if any(LOCATION_IN_SQL.search(piece) for piece in texts):
            found.append(f"{where}: a table's location written in the SQL text; use location(…)")
        if "location" in calls and "CREATE TABLE" in text and "table_options" not in calls:
            found.append(f"{where}: a table at a location without table_options(…) (its location is globbed)")
    return found


def test_every_path_handed_to_spark_goes_through_the_path_api() -> None:
    problems = [
        problem
        for path in sorted((ROOT / "jobs").rglob("*.py"))
        if path != ROOT / "jobs" / "fs" / "paths.py"  # the path API itself
        for problem in problems_in(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert problems == []


@pytest.mark.parametrize(
    "source",
    [
        "spark.read.text(path)",
        "spark.read.option('recursiveFileLookup', 'true').text(root)",
        "spark.read.parquet(*paths)",
        "spark.read.parquet(*(written(p) for p in paths))",
        "def f(spark, path):\n    reader = spark.read.option('a', 'b')\n    return reader.csv(path)",
        "frame.write.mode('overwrite').parquet(exact(target))",
        "def f(frame, t):\n    writer = frame.write.mode('overwrite')\n    writer.json(t)",
        "frame.write.partitionBy('b').text(target)",
        "spark.read.option('basePath', root).parquet(exact(p))",
        "spark.read.format('parquet').option('path', p).load()",
        "something.text(path)",
        "fs.globStatus(hpath)",
        "spark.sql(f\"CREATE TABLE t (a INT) USING parquet LOCATION '{path}'\")",
        'spark.sql(f"CREATE TABLE t (a INT) USING parquet {location(path)}")',
    ],
)
def test_the_check_finds_a_path_handed_any_other_way(source: str) -> None:
    assert problems_in(source, "x.py") != []


@pytest.mark.parametrize(
    "source",
    [
        "spark.read.text(exact(path))",
        "spark.read.text([exact(name) for name in files])",
        "spark.read.schema(s).parquet(*(exact(qualified(p)) for p in paths))",
        "def f(spark, path):\n    reader = spark.read.option('a', 'b')\n    return reader.csv(exact(path))",
        "def f(frame, t):\n    writer = frame.write.mode('overwrite')\n    writer.option('h', 'true').csv(written(t))",
        "spark.read.option('basePath', qualified(root)).parquet(exact(p))",
        'spark.sql(f"CREATE TABLE t (a INT) USING parquet {table_options()} {location(path)}")',
        "json.load(handle)",
        "response.json()",
    ],
)
def test_the_check_passes_the_path_api(source: str) -> None:
    assert problems_in(source, "x.py") == []
