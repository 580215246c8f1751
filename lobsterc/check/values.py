"""The values generator of the front end: the reference's load-time rules for a workflow
document, with its exact texts and JavaScript value semantics. `value_problems` yields every
problem of the file's own values, then of each step in turn, each at its own path; within a
step the rules run in the reference's order, so the first problem yielded is the reference's
first error (it stops there; we go on).

What stops where, so that one mistake does not become a cascade of nonsense:
- the file: not an object, or no non-empty `steps` array, stops everything; `cost_limit` that is
  not an object skips its fields; `max_usd` and `action` are independent;
- a step: not an object, or no string id (every message names the id), skips the step; each
  field is checked on its own, and an object field (`parallel`, `input`, `retry`) that has the
  wrong type skips its inner fields; the one-kind-of-step rule is skipped when `workflow`,
  `parallel` or `for_each` has the wrong type (the step's kind is then unknown);
- `parallel`: `branches` that is not a non-empty array skips the branches; a branch that is not
  an object or has no string id is skipped;
- `for_each`: `steps` that is not a non-empty array skips the sub-steps; `item_var` and
  `index_var` are compared only when both are strings; a sub-step without a string id is skipped.
A step's id, and its branches' string ids, count as seen for later steps' duplicate checks even
when the step has other problems. Also the predicates that say what a step is."""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain
from typing import Any

from lobsterc.diagnostics import Diagnostic
from lobsterc.load import Document, Path, fields
from lobsterc.syntax.ast import ABSENT
from vm.core import bounds
from vm.core.js import to_number, truthy

MAX_TIMEOUT_MS = bounds.TIMEOUT_MS.maximum  # a step's timeout_ms: the bound of a run's


def _get(obj: Any, key: str) -> Any:
    return obj.get(key, ABSENT) if isinstance(obj, dict) else ABSENT


def _truthy(value: Any) -> bool:
    return truthy(value)


def _is_object(value: Any) -> bool:
    """typeof value === "object" && value !== null (arrays included)."""
    return isinstance(value, (dict, list))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _is_integer(value: Any) -> bool:
    return _is_finite(value) and value == int(value)


def _to_number(value: Any) -> float:
    """JavaScript Number(value)."""
    return to_number(value)


def _nonblank_str(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def is_approval(value: Any) -> bool:
    """Whether a step's `approval` value makes it a gate: true, a non-blank string, or an object."""
    return value is True or _nonblank_str(value) or isinstance(value, dict)


def is_input(value: Any) -> bool:
    """Whether a step's `input` value makes it an input step (an object)."""
    return isinstance(value, dict)


def _shell_line(step: Any) -> Any:
    run = _get(step, "run")
    return run if isinstance(run, str) else _get(step, "command")


def step_kind(step: dict) -> str:
    """What a (validated) step executes: input, for_each, then parallel > workflow > pipeline >
    shell (run/command); with none of them, approval or noop."""
    get = step.get if isinstance(step, dict) else {}.get
    if isinstance(get("input"), dict):
        return "input"
    if isinstance(get("for_each"), str):
        return "for_each"
    if isinstance(get("parallel"), dict):
        return "parallel"
    workflow = get("workflow")
    if isinstance(workflow, str) and workflow.strip():
        return "workflow"
    pipeline = get("pipeline")
    if isinstance(pipeline, str) and pipeline:
        return "pipeline"
    run = get("run")
    if _truthy(run if isinstance(run, str) else get("command")):
        return "shell"
    return "approval" if is_approval(get("approval")) else "noop"


Problem = tuple[str, Path]  # a message and the path of the value it is about


class _Walk:
    """What the rules carry from step to step: the ids seen so far, and whether repeated ids and
    invalid responseSchemas are left to lint's own generators (lobsterc.check.problems)."""

    __slots__ = ("seen", "lenient")

    def __init__(self, lenient: bool) -> None:
        self.seen: set[str] = set()
        self.lenient = lenient


def value_problems(wf: Document, *, lenient: bool = False) -> Iterator[Diagnostic]:
    """The reference's problems of a parsed workflow file (E210): the file's own values, then
    every problem of each step; the first is the reference's first error. `lenient` (lint)
    leaves out repeated ids and invalid responseSchemas, which lint reports with more detail."""
    for message, path in value_problem_paths(wf, lenient=lenient):
        yield _diagnostic(wf, message, path)


def value_problem_paths(wf: Document, *, lenient: bool = False) -> Iterator[Problem]:
    """`value_problems` as (message, path of the value it is about)."""
    data = wf.data
    if not _is_object(data):
        yield "Workflow file must be a JSON/YAML object", ()
        return
    steps = _get(data, "steps")
    if not isinstance(steps, list) or not steps:
        yield "Workflow file requires a non-empty steps array", ("steps",)
        return
    walk = _Walk(lenient)
    yield from chain(_check_cost_limit(_get(data, "cost_limit")),
                     _check_checkpoint_ttl(_get(data, "checkpoint_ttl")),
                     *(_check_step(step, ("steps", index), walk)
                       for index, step in enumerate(steps)))


def _diagnostic(wf: Document, message: str, path: Path) -> Diagnostic:
    return Diagnostic(code="E210", message=message, span=wf.span_of(*path))


def _check_cost_limit(limit: Any) -> Iterator[Problem]:
    if limit is ABSENT:
        return
    if not isinstance(limit, dict):
        yield "Workflow cost_limit must be an object", ("cost_limit",)
        return
    max_usd = _to_number(limit.get("max_usd", ABSENT))
    if not math.isfinite(max_usd) or max_usd < 0:
        yield ("Workflow cost_limit.max_usd must be a non-negative number",
               ("cost_limit", "max_usd"))
    if limit.get("action", ABSENT) not in (ABSENT, "warn", "stop"):
        yield 'Workflow cost_limit.action must be "warn" or "stop"', ("cost_limit", "action")


def _check_checkpoint_ttl(ttl: Any) -> Iterator[Problem]:
    from lobsterc.load.build import checkpoint_ttl_ms

    if ttl is ABSENT or checkpoint_ttl_ms(ttl) is not None:
        return
    try:
        bounds.CHECKPOINT_TTL.parse(ttl, "checkpoint_ttl")
    except bounds.BoundError as exc:
        if exc.kind == "range":
            limit = bounds.CHECKPOINT_TTL.limit_text()
            yield f"Workflow checkpoint_ttl must be at most {limit}", ("checkpoint_ttl",)
            return
    yield ("Workflow checkpoint_ttl must be a duration such as 30m, 12h or 7d, or a positive "
           "number of milliseconds", ("checkpoint_ttl",))


def _check_step(step: Any, at: Path, walk: _Walk) -> Iterator[Problem]:
    if not _is_object(step):
        yield "Workflow step must be an object", at
        return
    sid = _get(step, "id")
    if not _truthy(sid) or not isinstance(sid, str):
        yield "Workflow step requires an id", (*at, "id")
        return
    yield from _check_workflow_ref(step, sid, at)
    parallel = step.get("parallel", ABSENT)
    if parallel is not ABSENT and not isinstance(parallel, dict):
        yield f"Workflow step {sid} parallel must be an object", (*at, "parallel")
    is_parallel = isinstance(parallel, dict)
    if is_parallel:
        yield from _check_parallel(parallel, sid, (*at, "parallel"), walk.seen)
    for_each = step.get("for_each", ABSENT)
    if for_each is not ABSENT and not isinstance(for_each, str):
        yield (f"Workflow step {sid} for_each must be a string (step reference expression)",
               (*at, "for_each"))
    is_for_each = isinstance(for_each, str)
    if is_for_each:
        yield from _check_for_each(step, sid, at, walk)
    if all(_typed(step, key, kind) for key, kind in _KIND_FIELDS):
        yield from _check_execution(step, sid, at, is_parallel, is_for_each)
    yield from _check_strings(step, f"Workflow step {sid}", at)
    yield from _check_input(step, sid, at, walk)
    yield from _check_approval(step.get("approval", ABSENT), sid, (*at, "approval"))
    yield from _check_limits(step, sid, at)
    if sid in walk.seen and not walk.lenient:
        yield f"Duplicate workflow step id: {sid}", (*at, "id")
    walk.seen.add(sid)
    if is_parallel and isinstance(parallel.get("branches"), list):
        walk.seen.update(bid for bid in map(_id_of, parallel["branches"]) if bid is not None)


def _id_of(value: Any) -> str | None:
    """A step's or branch's id when it is one (a non-empty string), else None."""
    sid = _get(value, "id")
    return sid if isinstance(sid, str) and sid else None


# the fields that name a step's kind: with one of the wrong type, the kind cannot be told
_KIND_FIELDS = (("workflow", str), ("parallel", dict), ("for_each", str))


def _typed(step: dict, key: str, kind: type) -> bool:
    """Whether a step's field is absent or of its type."""
    value = step.get(key, ABSENT)
    return value is ABSENT or isinstance(value, kind)


def _check_workflow_ref(step: dict, sid: str, at: Path) -> Iterator[Problem]:
    workflow = step.get("workflow", ABSENT)
    if workflow is not ABSENT and not isinstance(workflow, str):
        yield f"Workflow step {sid} workflow must be a string (file path)", (*at, "workflow")
    if isinstance(workflow, str) and not workflow.strip():
        yield f"Workflow step {sid} workflow path cannot be blank", (*at, "workflow")
    args = step.get("workflow_args", ABSENT)
    if args is not ABSENT and not isinstance(args, dict):
        yield (f"Workflow step {sid} workflow_args must be a plain object",
               (*at, "workflow_args"))


def _check_parallel(parallel: dict, sid: str, at: Path, seen: set[str]) -> Iterator[Problem]:
    branches = parallel.get("branches", ABSENT)
    valid = isinstance(branches, list) and bool(branches)
    if not valid:
        yield (f"Workflow step {sid} parallel requires a non-empty branches array",
               (*at, "branches"))
    if parallel.get("wait", ABSENT) not in (ABSENT, "all", "any"):
        yield f'Workflow step {sid} parallel wait must be "all" or "any"', (*at, "wait")
    timeout = parallel.get("timeout_ms", ABSENT)
    if timeout is not ABSENT and not _valid_timeout(timeout):
        yield (f"Workflow step {sid} parallel timeout_ms must be a positive integer between 1 "
               f"and {MAX_TIMEOUT_MS}", (*at, "timeout_ms"))
    if not valid:
        return
    branch_ids: set[str] = set()
    for index, branch in enumerate(branches):
        yield from _check_branch(branch, sid, (*at, "branches", index), branch_ids, seen)


def _check_branch(branch: Any, sid: str, at: Path, branch_ids: set[str],
                  seen: set[str]) -> Iterator[Problem]:
    if not _is_object(branch):
        yield f"Workflow step {sid} parallel branches must be objects", at
        return
    bid = _get(branch, "id")
    if not _truthy(bid) or not isinstance(bid, str):
        yield f"Workflow step {sid} parallel branch requires an id", (*at, "id")
        return
    if bid == sid:
        yield f"Workflow step {sid} parallel branch id cannot match the step id", (*at, "id")
    if bid in branch_ids:
        yield f"Workflow step {sid} duplicate parallel branch id: {bid}", (*at, "id")
    if bid in seen:
        yield f"Duplicate workflow id across steps/parallel branches: {bid}", (*at, "id")
    branch_ids.add(bid)
    pipeline = branch.get("pipeline", ABSENT)
    count = _truthy(_shell_line(branch)) + (isinstance(pipeline, str) and pipeline != "")
    prefix = f"Workflow step {sid} parallel branch {bid}"
    if count == 0:
        yield f"{prefix} requires run, command, or pipeline", at
    if count > 1:
        yield f"{prefix} can only define one of run, command, or pipeline", at
    yield from _check_strings(branch, prefix, at)


def _check_strings(step: Any, prefix: str, at: Path) -> Iterator[Problem]:
    for key in ("run", "command", "pipeline"):
        value = step.get(key, ABSENT)
        if value is not ABSENT and not isinstance(value, str):
            yield f"{prefix} {key} must be a string", (*at, key)


def _check_for_each(step: dict, sid: str, at: Path, walk: _Walk) -> Iterator[Problem]:
    subs = step.get("steps", ABSENT)
    if not isinstance(subs, list) or not subs:
        yield f"Workflow step {sid} for_each requires a non-empty steps array", (*at, "steps")
        subs = []
    batch = step.get("batch_size", ABSENT)
    if batch is not ABSENT and not (_is_integer(batch) and batch >= 1):
        yield f"Workflow step {sid} batch_size must be a positive integer", (*at, "batch_size")
    pause = step.get("pause_ms", ABSENT)
    if pause is not ABSENT and not (_is_finite(pause) and pause >= 0):
        yield (f"Workflow step {sid} pause_ms must be a finite non-negative number",
               (*at, "pause_ms"))
    for key, defines in (("approval", is_approval), ("input", is_input)):
        if defines(step.get(key, ABSENT)):
            yield (f"Workflow step {sid} for_each steps cannot define {key} (use a separate "
                   "step after the loop)", (*at, key))
    if step.get("stdin", ABSENT) not in (ABSENT, None):
        yield (f"Workflow step {sid} for_each steps cannot define stdin (loop input comes from "
               "the for_each expression)", (*at, "stdin"))
    pipeline = step.get("pipeline", ABSENT)
    if (
        _truthy(_shell_line(step))
        or (isinstance(pipeline, str) and pipeline != "")
        or _truthy(step.get("workflow", ABSENT))
        or _truthy(step.get("parallel", ABSENT))
    ):
        yield (f"Workflow step {sid} for_each cannot also define run, command, pipeline, "
               "workflow, or parallel", at)
    loop_vars = []
    for key in ("item_var", "index_var"):
        value = step.get(key, ABSENT)
        if value is not ABSENT and not isinstance(value, str):
            yield f"Workflow step {sid} {key} must be a string", (*at, key)
        loop_vars.append(fields.default(fields.STEP, key) if value is ABSENT else value)
    item_var, index_var = loop_vars
    if isinstance(item_var, str) and item_var == index_var:
        yield (f"Workflow step {sid} item_var and index_var cannot be the same",
               (*at, "index_var"))
    sub_ids: set[str] = set()
    for index, sub in enumerate(subs):
        yield from _check_sub_step(sub, sid, (*at, "steps", index), (item_var, index_var),
                                   sub_ids, walk)


def _check_sub_step(sub: Any, sid: str, at: Path, loop_vars: tuple[Any, Any],
                    sub_ids: set[str], walk: _Walk) -> Iterator[Problem]:
    sub_id = _get(sub, "id")
    if not _is_object(sub) or not _truthy(sub_id) or not isinstance(sub_id, str):
        yield f"Workflow step {sid} for_each sub-step requires an id", (*at, "id")
        return
    if sub_id in loop_vars:
        yield (f"Workflow step {sid} for_each sub-step id '{sub_id}' conflicts with loop "
               "variable", (*at, "id"))
    if sub_id in sub_ids and not walk.lenient:
        yield f"Workflow step {sid} duplicate for_each sub-step id: {sub_id}", (*at, "id")
    sub_ids.add(sub_id)
    prefix = f"Workflow step {sid} for_each sub-step {sub_id}"
    yield from _check_strings(sub, prefix, at)
    if any(_truthy(sub.get(key, ABSENT)) for key in ("workflow", "parallel", "for_each")):
        yield f"{prefix} cannot define workflow, parallel, or for_each", at
    shell = _nonblank_str(sub.get("run", ABSENT)) or _nonblank_str(sub.get("command", ABSENT))
    pipeline = _nonblank_str(sub.get("pipeline", ABSENT))
    # Deliberate difference (SPEC 9.5): approval and input gates may stand inside a loop,
    # because the frame keeps the loop stack; the reference rejects them.
    approval, inputs = is_approval(sub.get("approval", ABSENT)), is_input(sub.get("input", ABSENT))
    if inputs and (shell or pipeline):
        yield f"{prefix} input steps cannot define run, command, or pipeline", at
    if approval and inputs:
        yield f"{prefix} cannot define both approval and input", at
    if not shell and not pipeline and not approval and not inputs:
        yield f"{prefix} requires run, command, or pipeline", at
    if shell and pipeline:
        yield f"{prefix} can only define one of run, command, or pipeline", at
    if inputs:
        yield from _check_input(sub, prefix.removeprefix("Workflow step "), at, walk)


def _check_execution(step: dict, sid: str, at: Path, is_parallel: bool,
                     is_for_each: bool) -> Iterator[Problem]:
    """The one-kind-of-step rule (its run/command/pipeline types are _check_strings')."""
    pipeline = step.get("pipeline", ABSENT)
    count = (
        _truthy(_shell_line(step))
        + (isinstance(pipeline, str) and pipeline != "")
        + _nonblank_str(step.get("workflow", ABSENT))
        + is_parallel
        + is_for_each
    )
    approval = is_approval(step.get("approval", ABSENT))
    inputs = is_input(step.get("input", ABSENT))
    kinds = "run, command, pipeline, workflow, parallel, or for_each"
    if count == 0 and not approval and not inputs:
        yield (f"Workflow step {sid} requires run, command, pipeline, workflow, parallel, "
               "for_each, approval, or input", at)
    if count > 1:
        yield f"Workflow step {sid} can only define one of {kinds}", at
    if count > 0 and inputs:
        yield f"Workflow step {sid} input steps cannot define {kinds}", at
    if approval and inputs:
        yield f"Workflow step {sid} cannot define both approval and input", at


def _check_input(step: dict, sid: str, at: Path, walk: _Walk) -> Iterator[Problem]:
    value = step.get("input", ABSENT)
    if value is ABSENT:
        return
    at = (*at, "input")
    if not is_input(value):
        yield f"Workflow step {sid} input must be an object", at
        return
    if not isinstance(value.get("prompt", ABSENT), str):
        yield f"Workflow step {sid} input.prompt must be a string", (*at, "prompt")
    schema = value.get("responseSchema", ABSENT)
    if not (schema is None or _is_object(schema)):
        yield (f"Workflow step {sid} input.responseSchema must be an object",
               (*at, "responseSchema"))
        return
    if walk.lenient and isinstance(schema, dict):
        return  # lint reports it (E213)
    problem = _schema_problem(schema)
    if problem is not None:
        yield (f"Workflow step {sid} input.responseSchema is invalid: {problem}",
               (*at, "responseSchema"))


def _schema_problem(schema: Any) -> str | None:
    """Why a JSON Schema is not one of the input dialect (vm.core.schema), or None."""
    if not isinstance(schema, dict):
        return "schema must be object or boolean"
    key = repr(schema)  # of plain data: keeps key order, tells 1, 1.0, True and "1" apart
    if key in _schema_problems:
        return _schema_problems[key]
    from vm.core.schema import schema_fault

    problem = None
    fault = schema_fault(schema)
    if fault is not None:
        where = fault.json_path
        problem = fault.message if where == "$" else f"{fault.message} at {where}"
    if len(_schema_problems) >= _SCHEMA_CACHE_SIZE:
        _schema_problems.clear()
    _schema_problems[key] = problem
    return problem


_SCHEMA_CACHE_SIZE = 256
_schema_problems: dict[str, str | None] = {}  # repr of a responseSchema -> why it is invalid


_IDENTITY_FIELDS = (
    ("initiated_by", str, "a string"),
    ("initiatedBy", str, "a string"),
    ("required_approver", str, "a string"),
    ("requiredApprover", str, "a string"),
    ("require_different_approver", bool, "a boolean"),
    ("requireDifferentApprover", bool, "a boolean"),
)


def _check_approval(approval: Any, sid: str, at: Path) -> Iterator[Problem]:
    if not isinstance(approval, dict):
        return
    for key, kind, noun in _IDENTITY_FIELDS:
        value = approval.get(key, ABSENT)
        if value is not ABSENT and not isinstance(value, kind):
            yield f"Workflow step {sid} approval.{key} must be {noun}", (*at, key)


def _valid_timeout(value: Any) -> bool:
    return _is_integer(value) and 1 <= value <= MAX_TIMEOUT_MS


def _check_limits(step: dict, sid: str, at: Path) -> Iterator[Problem]:
    timeout = step.get("timeout_ms", ABSENT)
    if timeout is not ABSENT and not _valid_timeout(timeout):
        yield (f"Workflow step {sid} timeout_ms must be a positive integer between 1 and "
               f"{MAX_TIMEOUT_MS}", (*at, "timeout_ms"))
    if step.get("on_error", ABSENT) not in (ABSENT, "stop", "continue", "skip_rest"):
        yield (f'Workflow step {sid} on_error must be "stop", "continue", or "skip_rest"',
               (*at, "on_error"))
    retry = step.get("retry", ABSENT)
    if retry is ABSENT:
        return
    at = (*at, "retry")
    if not isinstance(retry, dict):
        yield f"Workflow step {sid} retry must be an object", at
        return
    value = retry.get("max", ABSENT)
    if value is not ABSENT and not (_is_integer(value) and value >= 1):
        yield f"Workflow step {sid} retry.max must be a positive integer", (*at, "max")
    if retry.get("backoff", ABSENT) not in (ABSENT, "fixed", "exponential"):
        yield (f'Workflow step {sid} retry.backoff must be "fixed" or "exponential"',
               (*at, "backoff"))
    for key in ("delay_ms", "max_delay_ms"):
        value = retry.get(key, ABSENT)
        if value is not ABSENT and not (_is_finite(value) and value >= 0):
            yield (f"Workflow step {sid} retry.{key} must be a finite non-negative number",
                   (*at, key))
    value = retry.get("jitter", ABSENT)
    if value is not ABSENT and not isinstance(value, bool):
        yield f"Workflow step {sid} retry.jitter must be a boolean", (*at, "jitter")
