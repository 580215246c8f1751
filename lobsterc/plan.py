"""Dry-run plans: what a pipeline would run, printed without running anything."""

from __future__ import annotations

from lobsterc.check import check_pipeline
from lobsterc.diagnostics import CompileError
from lobsterc.parse import parse_pipeline
from vm import js
from vm.protocol import RequestError, compile_error_fields


def pipeline_plan(text: str) -> str:
    """`[DRY RUN] Pipeline (N stages):` and one line per stage with its arguments."""
    try:
        pipeline = parse_pipeline(text)
        bound, diags = check_pipeline(pipeline)
        if diags:
            raise CompileError(diags)
    except CompileError as exc:
        raise RequestError(**compile_error_fields(exc)) from None
    count = len(bound)
    lines = [f"[DRY RUN] Pipeline ({count} stage{'' if count == 1 else 's'}):"]
    for index, item in enumerate(bound, start=1):
        parts = [f"{k}={js.to_string(v)}" for k, v in item.args.flags.items()] + list(item.args.positionals)
        detail = f"  args: {', '.join(parts)}" if parts else ""
        lines.append(f"  {index}. {item.command.name}{detail}")
    return "\n".join(lines) + "\n"
