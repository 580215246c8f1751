"""Dry-run plans: what a pipeline or a workflow file would run, printed without running
anything (reference sections 2 and 4.12)."""

from __future__ import annotations

from typing import Any

from attrs import define

from lobsterc import ast
from lobsterc.check import check_pipeline, check_stage
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.expr import compile_condition
from lobsterc.parse import parse_pipeline
from lobsterc.workflow_file import WorkflowFile, is_approval, load_workflow_file, step_kind
from vm import js
from vm.commands import COMMANDS
from vm.condition import MISSING, evaluate, truthy
from vm.protocol import RequestError, compile_error_fields
from vm.refs import REF, WHOLE_REF, substitute_args
from vm.steps import value_result


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


# ---------------------------------------------------------------------------------------------
# workflow files
#
# Nothing runs. Each step is "executed" against a model of the results so far: approval gates
# count as approved, input steps answer `{response: {pending: true}}`, skipped steps are
# `{id, skipped: true}`, and approval-only / no-op steps take their synthetic result from a
# literal stdin. What a shell, pipeline, sub-workflow, parallel or loop step would print is
# unknown: a condition that needs it is reported as decided at run time (three-valued logic,
# so `false && $x.json` is still decided).


class _UnknownValue:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _UnknownValue()  # a value only a real run can produce


@define
class _Output:
    """The result of a step that would execute: its fields are unknown at plan time, except
    `approved` (gates are modelled as approved), `skipped` (it ran) and, unless on_error lets
    the run go on after a failure, `error` / `errorMessage`."""

    approved: bool = False
    may_fail: bool = False


def workflow_plan(path: str, args: dict) -> str:
    """`[DRY RUN] Would execute N step(s):` and one entry per step, with what it would run."""
    from lobsterc.workflow import arg_defaults

    try:
        wf = load_workflow_file(path)
        resolved = {**arg_defaults(wf), **(args or {})}
        return _Planner(wf, resolved).plan()
    except CompileError as exc:
        raise RequestError(**compile_error_fields(exc)) from None


class _Planner:
    def __init__(self, wf: WorkflowFile, args: dict) -> None:
        self.wf = wf
        self.args = args
        self.lines: list[str] = []

    def plan(self) -> str:
        steps = self.wf.data["steps"]
        self.lines.append(f"[DRY RUN] Would execute {len(steps)} step(s):")
        results: dict[str, Any] = {}
        for index, step in enumerate(steps):
            self.step(step, ("steps", index), f"{index + 1}", "  ", results)
        return "\n".join(self.lines) + "\n"

    # one step --------------------------------------------------------------------------------
    def step(self, step: dict, at: tuple, number: str, indent: str, results: dict) -> None:
        sid = step["id"]
        kind = step_kind(step)
        head = f"{indent}{number}. "
        self.lines.append(f"{head}{sid}  [{_KIND_TAGS[kind]}]")
        pad = " " * len(head)
        decided = self.condition(step, at, results)
        if decided is False:
            self.lines.append(f"{pad}[skipped — condition: false]")
            results[sid] = {"id": sid, "skipped": True}
            return
        if decided is None:
            key = "when" if "when" in step else "condition"
            self.detail(pad, "when", _one_line(str(step[key]).strip()),
                        "[depends on step output — unknown at plan time]")
        if kind == "shell":
            self.detail(pad, "run", self.text(_shell_line(step)))
        elif kind == "pipeline":
            self.detail(pad, "pipeline", self.pipeline(step["pipeline"], at, sid, results))
        elif kind == "workflow":
            self.detail(pad, "workflow", self.text(step["workflow"]))
            wargs = step.get("workflow_args")
            if isinstance(wargs, dict) and wargs:
                self.lines.append(f"{pad}args: {', '.join(wargs)}")
        elif kind == "parallel":
            self.parallel(step, at, number, pad, results)
        elif kind == "for_each":
            self.for_each(step, at, number, pad, results)
        if kind != "for_each" and "stdin" in step:
            self.stdin(pad, step["stdin"], (*at, "stdin"), results)
        if kind != "input":
            self.policy(step, pad)
        gate = kind not in ("for_each", "input") and is_approval(step.get("approval"))
        if gate:
            self.lines.append(f"{pad}[approval required]")
        if kind == "input":
            self.lines.append(f"{pad}[input required]")
            results[sid] = {"id": sid, "subject": UNKNOWN, "response": {"pending": True}}
        elif kind in ("approval", "noop"):
            results[sid] = self.synthetic(sid, step.get("stdin"), results)
            if gate:
                results[sid]["approved"] = True
        else:
            may_fail = step.get("on_error") in ("continue", "skip_rest")
            results[sid] = _Output(approved=gate, may_fail=may_fail)

    def detail(self, pad: str, label: str, text: str, note: str = "") -> None:
        """`label: text`; continuation lines of a multi-line text line up under its start."""
        lines = text.split("\n")
        cont = " " * (len(pad) + len(label) + 2)
        body = f"\n{cont}".join(lines)
        self.lines.append(f"{pad}{label}: {body}" + (f"  {note}" if note else ""))

    def text(self, value: str) -> str:
        return substitute_args(value, self.args).rstrip("\n")

    def policy(self, step: dict, pad: str) -> None:
        if "timeout_ms" in step:
            self.lines.append(f"{pad}timeout: {js.to_string(step['timeout_ms'])}ms")
        on_error = step.get("on_error")
        if on_error in ("continue", "skip_rest"):
            self.lines.append(f"{pad}on_error: {on_error}")
        retry = step.get("retry")
        if isinstance(retry, dict):
            attempts = js.to_string(retry.get("max", 1))
            backoff = retry.get("backoff", "fixed")
            base = js.to_string(retry.get("delay_ms", 1000))
            jitter = ", jitter" if retry.get("jitter") is True else ""
            self.lines.append(f"{pad}retry: up to {attempts} attempts, {backoff} backoff "
                              f"(base: {base}ms{jitter})")

    # stdin and references --------------------------------------------------------------------
    def stdin(self, pad: str, value: Any, where: tuple, results: dict) -> None:
        if not isinstance(value, str):
            self.detail(pad, "stdin", js.json_compact(value))
            return
        whole = WHOLE_REF.match(value.strip())
        if whole:
            self.strict(whole[1], whole[2][1:], where, results)
            self.detail(pad, "stdin", value.strip(), "[output unknown at plan time]")
            return
        text = self.text(value)
        note = "[contains step output refs — unknown at plan time]" if self.has_refs(
            text, results) else ""
        self.detail(pad, "stdin", text, note)

    def has_refs(self, text: str, results: dict) -> bool:
        return any(m[1] in results for m in REF.finditer(text))

    def strict(self, ref: str, path: str, where: tuple, results: dict) -> None:
        if ref not in results:
            from lobsterc.check import did_you_mean

            raise CompileError([Diagnostic("E211", f"Unknown step reference: {ref}.{path}",
                                           self.wf.span_of(*where),
                                           help=did_you_mean(ref, list(results)))])

    def synthetic(self, sid: str, value: Any, results: dict) -> Any:
        """An approval-only / no-op step's result: from a literal stdin, else unknown."""
        if isinstance(value, str):
            if WHOLE_REF.match(value.strip()) or self.has_refs(substitute_args(value, self.args),
                                                              results):
                return {"id": sid, "stdout": UNKNOWN, "json": UNKNOWN}
            value = substitute_args(value, self.args)
        return value_result(sid, value)

    # conditions ------------------------------------------------------------------------------
    def condition(self, step: dict, at: tuple, results: dict) -> bool | None:
        """True, False, or None when it depends on output only a real run has."""
        key = "when" if "when" in step else "condition" if "condition" in step else None
        if key is None:
            return True
        where = (*at, key)
        tree = compile_condition(step[key], self.wf.span_of(*where))

        def resolve(ref: str, path: list[str]) -> Any:
            self.strict(ref, ".".join(path), where, results)
            return _lookup(results[ref], path)

        value = _value3(tree, resolve)
        return None if value is UNKNOWN else truthy(value)

    # execution kinds -------------------------------------------------------------------------
    def pipeline(self, text: str, at: tuple, sid: str, results: dict) -> str:
        """The pipeline text with `${arg}` substituted, its stages checked by the compiler; a
        stage whose name comes from a step's output cannot be checked, one whose arguments do
        has its name checked only."""
        shown = self.text(text)
        span = self.wf.span_of(*at, "pipeline")
        try:
            parsed = parse_pipeline(shown, self.wf.path)
        except CompileError as exc:
            raise CompileError([Diagnostic("E210", f"Workflow step {sid} pipeline parse failed: "
                                           f"{exc.first.message}", span)]) from None
        for stage in parsed.stages:
            name = stage.name.text
            if self.has_refs(name, results):
                continue
            if any(self.has_refs(word.text, results) for word in stage.words):
                found = [d for d in check_stage(ast.Stage(stage.name, (), stage.span))
                         if isinstance(d, Diagnostic) and d.code == "E201"]
                command = COMMANDS.get(name)
            else:
                found = list(check_stage(stage))
                command = found[-1].command if found and not isinstance(found[-1], Diagnostic) else None
            problem = next((d for d in found if isinstance(d, Diagnostic)), None)
            if problem is not None:
                raise CompileError([Diagnostic(problem.code, problem.message, span,
                                               help=problem.help)])
            if command is not None and command.lowering == "approve":
                raise CompileError([Diagnostic(
                    "E214", f"Workflow step {sid} halted for approval inside pipeline stage "
                    f"{command.name}. Use a separate approval step in the workflow file.", span)])
            if command is not None and command.lowering == "ask":
                raise CompileError([Diagnostic(
                    "E214", f"Workflow step {sid} halted before completion at pipeline stage "
                    f"{command.name}", span)])
        return shown

    def parallel(self, step: dict, at: tuple, number: str, pad: str, results: dict) -> None:
        par = step["parallel"]
        wait = par.get("wait", "all")
        timeout = f", timeout: {js.to_string(par['timeout_ms'])}ms" if "timeout_ms" in par else ""
        self.lines.append(f"{pad}wait: {wait}{timeout}")
        for index, branch in enumerate(par["branches"]):
            where = (*at, "parallel", "branches", index)
            bid = branch["id"]
            pipeline = branch.get("pipeline")
            is_pipeline = isinstance(pipeline, str) and pipeline != ""
            head = f"{pad}{number}.{index + 1}. "
            self.lines.append(f"{head}{bid}  [{'pipeline' if is_pipeline else 'shell'}]")
            sub = " " * len(head)
            if is_pipeline:
                self.detail(sub, "pipeline", self.pipeline(pipeline, where, bid, results))
            else:
                self.detail(sub, "run", self.text(_shell_line(branch)))
            if "stdin" in branch:
                self.stdin(sub, branch["stdin"], (*where, "stdin"), results)
        for branch in par["branches"]:
            results[branch["id"]] = _Output()

    def for_each(self, step: dict, at: tuple, number: str, pad: str, results: dict) -> None:
        source = step["for_each"]
        whole = WHOLE_REF.match(source.strip())
        if whole:
            self.strict(whole[1], whole[2][1:], (*at, "for_each"), results)
            self.detail(pad, "for_each", source.strip(), "[output unknown at plan time]")
        else:
            text = self.text(source)
            note = "[contains step output refs — unknown at plan time]" if self.has_refs(
                text, results) else ""
            self.detail(pad, "for_each", text, note)
        item_var = step.get("item_var", "item")
        index_var = step.get("index_var", "index")
        scope = {**results, item_var: _Output(), index_var: _Output()}
        for index, sub in enumerate(step["steps"]):
            self.step(sub, (*at, "steps", index), f"{number}.{index + 1}", pad, scope)


_KIND_TAGS = {"shell": "shell", "pipeline": "pipeline", "workflow": "workflow",
              "parallel": "parallel", "for_each": "for_each", "input": "input",
              "approval": "no-op", "noop": "no-op"}


def _shell_line(step: dict) -> str:
    return step["run"] if isinstance(step.get("run"), str) else step["command"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _lookup(result: Any, path: list[str]) -> Any:
    """A reference into the plan-time model of a step result: a value, MISSING, or UNKNOWN."""
    if isinstance(result, _Output):
        head = path[0] if path else ""
        if head == "skipped":
            value: Any = js.UNDEFINED
        elif head == "approved":
            value = True if result.approved else js.UNDEFINED
        elif head in ("error", "errorMessage") and not result.may_fail:
            value = js.UNDEFINED
        else:
            return UNKNOWN
        return MISSING if value is js.UNDEFINED or len(path) > 1 else value
    value = result
    for segment in path:
        if value is UNKNOWN:
            return UNKNOWN
        value = js.get_prop(value, segment) if value is not js.UNDEFINED else js.UNDEFINED
    if value is UNKNOWN:
        return UNKNOWN
    return MISSING if value is js.UNDEFINED else value


def _value3(tree: Any, resolve) -> Any:
    """vm.condition's semantics, with UNKNOWN for what depends on unknown output (Kleene
    logic for `!`, `&&`, `||`; every reference is still resolved, strictly)."""
    tag = tree[0]
    if tag in ("const", "lit"):
        return tree[1]
    if tag == "ref":
        return resolve(tree[1], list(tree[2]))
    if tag == "not":
        value = _value3(tree[1], resolve)
        return UNKNOWN if value is UNKNOWN else not truthy(value)
    if tag in ("and", "or"):
        left, right = _value3(tree[1], resolve), _value3(tree[2], resolve)
        sides = [v if v is UNKNOWN else truthy(v) for v in (left, right)]
        if tag == "and":
            if False in sides:
                return False
            return UNKNOWN if UNKNOWN in sides else True
        if True in sides:
            return True
        return UNKNOWN if UNKNOWN in sides else False
    if tag == "cmp":
        left, right = _value3(tree[2], resolve), _value3(tree[3], resolve)
        if left is UNKNOWN or right is UNKNOWN:
            return UNKNOWN
        return evaluate(["cmp", tree[1], ["lit", left], ["lit", right]], resolve)
    raise ValueError(f"unknown condition node {tag!r}")
