"""How a dry run refuses a file: the checker's refusal, worded as the original's dry run words
it and chosen as the first error its step-by-step planning would meet (lobsterc/tools/plan.py
plans; this module only shapes what it raises)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from attrs import evolve

from lobsterc.diagnostics import CompileError, Diagnostic, met_at
from lobsterc.syntax import ast


def earlier_in_plan(refused: CompileError, wf: ast.Workflow | None,
                    plan: Callable[[], str]) -> CompileError:
    """The error the original's dry run meets first, stepping through the file: the checker's
    refusal, unless planning the steps before it fails first (a templated pipeline, which the
    checker leaves to the planner, naming an unknown command in an earlier step). `plan` plans
    the file; the refusal is first worded as the dry run words it (`_in_plan_words`)."""
    refused = _in_plan_words(wf, refused)
    at = refused.first.span
    if wf is None or at is None:
        return refused
    try:
        plan()
    except CompileError as planned:
        span = planned.first.span  # met where it is written, or before (a step's condition)
        if span is not None and span.source == at.source \
                and met_at(planned.first) < met_at(refused.first):
            return planned
    except Exception:  # noqa: BLE001 - a file the checker refused may not plan at all
        pass
    return refused


def _resolved_fields(wf: ast.Workflow):
    """(how the dry run names it, span) of every reference field the original's dry run
    resolves as it plans: a step's stdin, a for_each source and its sub-steps' stdin."""
    for step in wf.steps:
        if isinstance(step.kind, ast.ForEach):
            loop = step.kind
            if loop.source.strip().startswith("$"):
                yield f"Workflow step {step.id} for_each", loop.loc.span()
            for sub in loop.steps:
                if isinstance(sub.stdin, str):
                    yield (f"Workflow step {step.id} for_each sub-step {sub.id} stdin",
                           sub.loc.span("stdin"))
        if isinstance(step.stdin, str):
            yield f"Workflow step {step.id} stdin", step.loc.span("stdin")


def _within(inner, outer) -> bool:
    """Whether the span `inner` lies inside the span `outer` (None: nowhere)."""
    return outer is not None and inner.source == outer.source \
        and (outer.line, outer.col) <= (inner.line, inner.col) \
        and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def _in_plan_words(wf: ast.Workflow | None, refused: CompileError) -> CompileError:
    """A refusal worded as the original's dry run words it: an unknown command in a step's (or
    branch's) pipeline is `Workflow step ID pipeline references unknown command: NAME`, an
    unknown reference in a field the dry run resolves `Workflow step ID stdin: Unknown step
    reference: REF` (`for_each`, `for_each sub-step SUB stdin`)."""
    first = refused.first
    if wf is not None and first.span is not None \
            and first.message.startswith("Unknown step reference: "):
        # a reference the dry run resolves names the step and the field it is in
        for field, span in _resolved_fields(wf):
            if _within(first.span, span):
                return CompileError([evolve(first, message=f"{field}: {first.message}")],
                                    refused.source)
    m = re.fullmatch(r"Unknown command: (\S+)", first.message)
    if wf is None or m is None or first.span is None:
        return refused
    owners = []
    for step in wf.steps:
        if isinstance(step.kind, ast.PipelineStep):
            owners.append((f"Workflow step {step.id}", step.kind.pipeline))
        elif isinstance(step.kind, ast.Parallel):
            owners += [(f"Parallel branch {b.id}", b.pipeline) for b in step.kind.branches
                       if b.pipeline is not None]
    for owner, pipeline in owners:
        if _within(first.span, pipeline.span):
            return CompileError([evolve(first, message=f"{owner} pipeline references unknown "
                                        f"command: {m[1]}")], refused.source)
    return refused


def unless_templated(wf: ast.Workflow, diags: list[Diagnostic],
                     templated: Callable[[str], bool]) -> list[Diagnostic]:
    """The checker's diagnostics, but for what the reference works out at run time and a plan
    shows worked out: a `workflow:` path with `${arg}` in it, and a pipeline with `${arg}` or a
    step reference in it (the planner checks that one as it would run)."""
    regions = [p.span for p in _pipelines(wf.steps) if templated(p.text)]
    return [d for d in diags if d.code != "E215"
            and not (d.span is not None and any(_within(d.span, r) for r in regions))]


def _pipelines(steps: tuple[ast.Step, ...]) -> Iterator[ast.PipelineText]:
    for step in steps:
        kind = step.kind
        if isinstance(kind, ast.PipelineStep):
            yield kind.pipeline
        elif isinstance(kind, ast.Parallel):
            yield from (b.pipeline for b in kind.branches if b.pipeline is not None)
        elif isinstance(kind, ast.ForEach):
            yield from _pipelines(kind.steps)
