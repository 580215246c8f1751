"""This module is the compiler as `vm` sees it (`vm.frontend.Frontend`): compile with the cache,
plan, graph, and compile errors for envelopes and terminals. The parser loads on first use only.
`lobster()` is the `lobster` command: vm's CLI, wired to this compiler.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lobsterc import cache
from lobsterc.diagnostics import CompileError, render
from vm.program import Program
from vm.store import Store

__all__ = ["CompileError", "compile_pipeline", "compile_workflow", "error_fields", "graph",
           "graph_formats", "lobster", "plan_pipeline", "plan_workflow", "render_error"]


def compile_pipeline(text: str, store: Store | None = None) -> Program:
    def build() -> tuple[Program, list[str]]:
        from lobsterc.codegen import compile_pipeline

        return compile_pipeline(text), []

    return cache.compiled(store, "pipeline", text, build)


def compile_workflow(path: str, store: Store | None = None) -> Program:
    def build() -> tuple[Program, list[str]]:
        from lobsterc.workflow import compile_workflow_files

        return compile_workflow_files(path)

    return cache.compiled(store, "workflow", os.path.realpath(path), build)


def plan_pipeline(text: str) -> str:
    from lobsterc.plan import pipeline_plan

    return pipeline_plan(text)


def plan_workflow(path: str, args: dict) -> str:
    from lobsterc.plan import workflow_plan

    return workflow_plan(path, args)


def graph_formats() -> tuple[str, ...]:
    from lobsterc.graph import FORMATS

    return FORMATS


def graph(path: str, fmt: str, args: dict) -> str:
    from lobsterc.graph import render_graph
    from lobsterc.workflow_file import load_workflow_file

    return render_graph(load_workflow_file(path), fmt, args)


def error_fields(exc: CompileError) -> dict[str, Any]:
    diag = exc.first
    location = None
    if diag.span is not None:
        location = {"file": diag.span.source, "line": diag.span.line, "column": diag.span.col}
    return {"message": diag.message, "code": diag.code, "kind": diag.kind, "location": location}


def render_error(exc: CompileError) -> str:
    return "\n".join(render(d, exc.source) for d in exc.diagnostics)


def lobster(argv: Sequence[str] | None = None) -> int:
    """The `lobster` console script: no entry-point lookup, so a cached run or a resume starts
    as fast as the VM alone, and the parser still loads only when a compile needs it."""
    import lobsterc.frontend
    from vm.cli import main

    return main(argv, frontend=lobsterc.frontend)
