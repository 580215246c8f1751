"""This module is the compiler as `vm` sees it (`vm.service.frontend.Frontend`): compile with the cache,
plan, graph, and compile errors for envelopes and terminals. The `lobster` script imports it
at start-up, so everything else (the cache, the parser, even CompileError) loads on first use.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: `lobster --help` is fast
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from lobsterc.diagnostics import CompileError
    from vm.isa.program import Program
    from vm.host.store import Store

__all__ = ["CompileError", "compile_pipeline", "compile_workflow", "error_fields", "graph",
           "graph_formats", "input_schemas", "lobster", "plan_pipeline", "plan_workflow", "render_error"]


def __getattr__(name: str) -> Any:
    if name == "CompileError":  # read by vm only when something was raised
        from lobsterc.diagnostics import CompileError

        return CompileError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compile_pipeline(text: str, store: Store | None = None) -> Program:
    from lobsterc.generate import cache

    def build() -> tuple[Program, list[str]]:
        from lobsterc.generate.codegen import compile_pipeline

        return compile_pipeline(text), []

    return cache.compiled(store, "pipeline", text, build)


def compile_workflow(path: str, store: Store | None = None) -> Program:
    from lobsterc.generate import cache

    def build() -> tuple[Program, list[str]]:
        from lobsterc.generate.workflow import compile_workflow_files

        return compile_workflow_files(path)

    return cache.compiled(store, "workflow", os.path.realpath(path), build)


def plan_pipeline(text: str) -> str:
    from lobsterc.tools.plan import pipeline_plan

    return pipeline_plan(text)


def plan_workflow(path: str, args: dict) -> str:
    from lobsterc.tools.plan import workflow_plan

    return workflow_plan(path, args)


# the original's load checks of a step that come after it compiles the step's responseSchema
_AFTER_COMPILE = (" timeout_ms must", " on_error must", " retry", "Duplicate workflow step id",
                  " input.responseSchema is invalid")


def input_schemas(path: str, refused: str | None = None) -> list:
    """The responseSchema of each input step of a workflow file, in step order: what the
    original compiles as it loads the file. `refused`: the message the file is refused with;
    when the original's load refuses it too, only the schemas it compiled before. [] for a
    file that does not parse."""
    from lobsterc.load import parse_text, read_text

    try:
        doc = parse_text(read_text(path), path)
    except Exception:  # noqa: BLE001 - the load itself reports it
        return []
    steps = doc.data.get("steps") if isinstance(doc.data, dict) else None
    steps = steps if isinstance(steps, list) else []
    upto = len(steps)
    if refused is not None:
        from lobsterc.check.values import value_problem_paths

        first = next(value_problem_paths(doc), None)
        if first is not None and first[0] == refused and (first[1][:1] != ("checkpoint_ttl",)):
            where = first[1]
            upto = where[1] if where[:1] == ("steps",) and len(where) > 1 else 0
            upto += len(where) > 1 and any(part in refused for part in _AFTER_COMPILE)
    return [step["input"]["responseSchema"] for step in steps[:upto]
            if isinstance(step, dict) and isinstance(step.get("input"), dict)
            and isinstance(step["input"].get("responseSchema"), dict)]


def refused_ask_schema(text: str, exc: CompileError) -> Any:
    """The schema of the `ask` stage a pipeline is refused for (its schema cannot be compiled),
    else None: what the original compiles, and warns about, as that stage runs."""
    import json

    from lobsterc.check.stages import bind
    from lobsterc.syntax.parse import parse_pipeline
    from vm.host.commands import COMMANDS

    diag = exc.first
    if diag.message != "ask response schema is invalid" or diag.span is None:
        return None
    try:
        stages = parse_pipeline(text).stages
    except Exception:  # noqa: BLE001 - not the stage refused
        return None
    for stage in stages:
        if stage.name.text == "ask" and (stage.span.line, stage.span.col) == (
                diag.span.line, diag.span.col):
            schema = bind(stage, COMMANDS["ask"])[0].get("schema")
            try:
                return json.loads(schema) if isinstance(schema, str) else None
            except ValueError:
                return None
    return None


def graph_formats() -> tuple[str, ...]:
    from lobsterc.tools.graph import FORMATS

    return FORMATS


def graph(path: str, fmt: str, args: dict) -> str:
    from lobsterc.tools.graph import render_graph
    from lobsterc.check.problems import load_checked

    return render_graph(load_checked(path), fmt, args)


def check_migration(old: Program, new: Program, frame: Any, accept: tuple[str, ...] = (),
                    source: str | None = None) -> Any:
    from lobsterc.tools.migrate_check import check_migration as check

    return check(old, new, frame, accept, source)


def error_fields(exc: CompileError) -> dict[str, Any]:
    diag = exc.first
    location = None
    if diag.span is not None:
        location = {"file": diag.span.source, "line": diag.span.line, "column": diag.span.col}
    return {"message": diag.message, "code": diag.code, "kind": diag.kind, "location": location}


def render_error(exc: CompileError) -> str:
    from lobsterc.diagnostics import render

    return "\n".join(render(d, exc.source) for d in exc.diagnostics)


def lobster(argv: Sequence[str] | None = None) -> int:
    """The `lobster` console script: vm's CLI wired to this compiler with no entry-point lookup,
    so a cached run or a resume starts as fast as the VM alone. Called by the script (no
    `argv`), it also ends the process (`vm.cli.main.leave`); called with `argv`, it returns."""
    import lobsterc.frontend

    if argv is not None:
        from vm.cli.main import main

        return main(argv, frontend=lobsterc.frontend)
    import sys

    from vm.cli.main import leave, main, one_process

    one_process(sys.argv[1:])
    return leave(main(None, frontend=lobsterc.frontend))


def _invoke_shim(name: str, argv: Sequence[str] | None) -> int:
    """`NAME WORD...` runs the pipeline `NAME "WORD" ...` in human mode, each word a literal
    argument (double-quoted, its `\\`, `"`, `$` and backquote escaped), as the original's
    `openclaw.invoke` and `clawd.invoke` executables do."""
    import sys

    words = list(sys.argv[1:] if argv is None else argv)
    quoted = ['"' + "".join("\\" + c if c in '\\"$`' else c for c in w) + '"' for w in words]
    return lobster([" ".join([name, *quoted])])


def openclaw_invoke(argv: Sequence[str] | None = None) -> int:
    """The `openclaw.invoke` console script (the original ships it)."""
    return _invoke_shim("openclaw.invoke", argv)


def clawd_invoke(argv: Sequence[str] | None = None) -> int:
    """The `clawd.invoke` console script (the original ships it)."""
    return _invoke_shim("clawd.invoke", argv)
