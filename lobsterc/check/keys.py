"""Unknown keys in a workflow file are errors (E217), with "did you mean" when a known key is
close; keys that start with `x-` are free (tools add them on purpose). The original ignores
unknown keys, so a typo (`timout_ms`, `condtion`, `wen`) silently drops what it meant: a
deliberate difference (SPEC 9).

The known keys of each object are the workflow format's (lobsterc.load.fields); maps
whose keys are the file's own (`args`, `env`, `workflow_args`, a `responseSchema`, `defaults`,
`items`) are not checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from lobsterc.diagnostics import Diagnostic
from lobsterc.load import Document, Path, fields

FREE_PREFIX = "x-"

TOP = fields.WORKFLOW.names
COST_LIMIT = fields.COST_LIMIT.names
ARG = fields.ARG.names
STEP = fields.STEP.names  # for_each sub-steps too: gates work inside loops here
APPROVAL = fields.APPROVAL.names
INPUT = fields.INPUT.names
RETRY = fields.RETRY.names
PARALLEL = fields.PARALLEL.names
BRANCH = fields.BRANCH.names
# a step's objects whose keys are checked, in the order they are reported
STEP_PARTS = (("approval", APPROVAL), ("input", INPUT), ("retry", RETRY), ("parallel", PARALLEL))


def unknown_keys(doc: Document) -> Iterator[tuple[Diagnostic, Path]]:
    """Every unknown key of the document, in document order: its diagnostic and its path."""
    data = doc.data
    if not isinstance(data, dict):
        return
    yield from _object(doc, data, (), TOP, "Workflow file")
    args = data.get("args")
    if isinstance(args, dict):
        for name, spec in args.items():
            if isinstance(spec, dict):
                yield from _object(doc, spec, ("args", name), ARG, f"Workflow arg {name}")
    limit = data.get("cost_limit")
    if isinstance(limit, dict):
        yield from _object(doc, limit, ("cost_limit",), COST_LIMIT, "Workflow cost_limit")
    steps = data.get("steps")
    if isinstance(steps, list):
        yield from _steps(doc, steps, ("steps",), "Workflow step {sid}")


def _steps(doc: Document, steps: list, at: Path, what: str) -> Iterator[tuple[Diagnostic, Path]]:
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        sid = step.get("id")
        name = what.format(sid=sid if isinstance(sid, str) and sid else f"#{index + 1}")
        where = (*at, index)
        yield from _object(doc, step, where, STEP, name)
        for field, known in STEP_PARTS:
            part = step.get(field)
            if isinstance(part, dict):
                yield from _object(doc, part, (*where, field), known, f"{name} {field}")
        par = step.get("parallel")
        if isinstance(par, dict):
            branches = par.get("branches")
            for bi, branch in enumerate(branches if isinstance(branches, list) else ()):
                if isinstance(branch, dict):
                    bid = branch.get("id")
                    label = bid if isinstance(bid, str) and bid else f"#{bi + 1}"
                    yield from _object(doc, branch, (*where, "parallel", "branches", bi), BRANCH,
                                       f"{name} parallel branch {label}")
        subs = step.get("steps")
        if isinstance(subs, list):
            yield from _steps(doc, subs, (*where, "steps"), f"{name} for_each sub-step {{sid}}")


def _object(doc: Document, obj: dict, at: Path, known: tuple[str, ...],
            what: str) -> Iterator[tuple[Diagnostic, Path]]:
    from lobsterc.check.stages import did_you_mean

    for key in obj:
        if not isinstance(key, str):
            key = str(key)
        if key in known or key.startswith(FREE_PREFIX):
            continue
        hint = did_you_mean(key, known)
        message = f"{what} has unknown key: {key}" + (f" ({hint})" if hint else "")
        listing = f"{what} takes: {', '.join(known)} (keys starting with {FREE_PREFIX} are free)"
        yield (Diagnostic("E217", message, doc.key_span_of(*at, key), help=listing), (*at, key))

