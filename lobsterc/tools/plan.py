"""Dry-run plans: what a pipeline or a workflow file would run, printed without running
anything (reference sections 2 and 4.12)."""

from __future__ import annotations

import re
from typing import Any

from attrs import define


from lobsterc.syntax import ast
from lobsterc.check.checker import halting_stage
from lobsterc.check.stages import check_pipeline, check_stage, written_flags
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax.parse import parse_pipeline
from lobsterc.tools.plan_refusal import earlier_in_plan, unless_templated
from vm.core import js
from vm.host.commands import COMMANDS
from vm.core.condition import MISSING, evaluate, truthy
from vm.engine.refs import ARG, REF, WHOLE_REF, lookup, substitute_args
from vm.engine.steps import value_result


def pipeline_plan(text: str) -> str:
    """`[DRY RUN] Pipeline (N stages):` and one line per stage with its arguments."""
    pipeline = parse_pipeline(text)
    bound, diags = check_pipeline(pipeline)
    if diags:
        raise CompileError(diags)
    count = len(bound)
    lines = [f"[DRY RUN] Pipeline ({count} stage{'' if count == 1 else 's'}):"]
    for index, (item, stage) in enumerate(zip(bound, pipeline.stages), start=1):
        parts = _stage_args(written_flags(stage, item.command), item.args.positionals)
        detail = f"  args: {', '.join(parts)}" if parts else ""
        lines.append(f"  {index}. {item.command.name}{detail}")
    return "\n".join(lines) + "\n"


def _stage_args(flags: dict, positionals) -> list[str]:
    """A stage's arguments in the original's order: its parser keeps them in one JavaScript
    object created as `{_: [...]}` with each flag added as it appears, and such an object lists
    array-index keys (`--3 x`) first, in numeric order, then `_`, then the other keys."""
    index = sorted((k for k in flags if _array_index(k)), key=int)
    named = [k for k in flags if not _array_index(k)]
    shown = [f"{k}={js.to_string(flags[k])}" for k in index] + [str(p) for p in positionals]
    return shown + [f"{k}={js.to_string(flags[k])}" for k in named]


def _array_index(key: str) -> bool:
    return key.isdigit() and key.isascii() and str(int(key)) == key and int(key) < 2**32 - 1


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
    """`[DRY RUN] Would execute N step[s]:`, a blank line, and one entry per step, with what it would run. A
    file the compiler refuses is refused with the same diagnostic (lobsterc.check.checker)."""
    from lobsterc.check.checker import check_file, refusal

    loaded, diags = check_file(path)
    wf = loaded.workflow
    if wf is not None:
        diags = unless_templated(wf, diags, _templated)
    refused = refusal(diags)
    if refused is not None:
        raise earlier_in_plan(refused, wf, lambda: _Planner(wf, {**wf.defaults,
                                                                 **(args or {})}).plan())
    return _Planner(wf, {**wf.defaults, **(args or {})}).plan()


def _templated(text: str) -> bool:
    return ARG.search(text) is not None or REF.search(text) is not None


class _Planner:
    def __init__(self, wf: ast.Workflow, args: dict) -> None:
        self.wf = wf
        self.args = args
        self.lines: list[str] = []
        self.deferred = False  # a stage name of the last pipeline comes from step output

    def plan(self) -> str:
        steps = self.wf.steps
        count = len(steps)
        self.lines += [f"[DRY RUN] Would execute {count} step{'' if count == 1 else 's'}:", ""]
        results: dict[str, Any] = {}
        for index, step in enumerate(steps):
            self.step(step, f"{index + 1}", "  ", results)
        return "\n".join(self.lines) + "\n"

    # one step --------------------------------------------------------------------------------
    def step(self, step: ast.Step, number: str, indent: str, results: dict) -> None:
        sid, kind = step.id, step.kind
        head = f"{indent}{number}. "
        pad = " " * len(head)
        decided = self.condition(step.when, results)
        if decided is False:
            self.lines.append(f"{head}{sid}  [skipped — condition: false]")
            results[sid] = {"id": sid, "skipped": True}
            return
        self.lines.append(f"{head}{sid}  [{_KIND_TAGS[kind.tag]}]")
        if decided is None:
            self.detail(pad, "when", _one_line(str(step.when.value).strip()),
                        "[depends on step output — unknown at plan time]")
        if isinstance(kind, ast.Shell):
            self.detail(pad, "run", self.resolved(kind.line, results))
        elif isinstance(kind, ast.PipelineStep):
            self.deferred = False
            self.detail(pad, "pipeline", self.pipeline(kind.pipeline, sid, results))
            if self.deferred:
                self.lines.append(f"{pad}[command validation deferred — stage name depends on step output]")
        elif isinstance(kind, ast.SubWorkflow):
            self.detail(pad, "workflow", _approved(self.text(kind.target), results))
            if kind.args:
                self.lines.append(f"{pad}args: {', '.join(kind.args)}")
        elif isinstance(kind, ast.Parallel):
            self.parallel(kind, number, pad, results)
        elif isinstance(kind, ast.ForEach):
            self.for_each(kind, number, pad, results)
        if not isinstance(kind, ast.ForEach) and step.stdin is not ast.ABSENT:
            self.stdin(pad, step.stdin, results)
        if step.policy is not None:
            self.policy(step.policy, pad)
        gate = step.approval is not None
        if gate:
            self.lines.append(f"{pad}[approval required]")
        if isinstance(kind, ast.InputGate):
            if isinstance(kind.prompt, str):
                self.lines.append(f"{pad}prompt: {self.text(kind.prompt)}")
            self.lines.append(f"{pad}[input required]")
            results[sid] = {"id": sid, "subject": UNKNOWN, "response": {"pending": True}}
        elif isinstance(kind, ast.NoOp):
            results[sid] = self.synthetic(sid, None if step.stdin is ast.ABSENT else step.stdin,
                                          results)
            if gate:
                results[sid]["approved"] = True
        else:
            on_error = step.policy.on_error if step.policy is not None else None
            results[sid] = _Output(approved=gate, may_fail=on_error in ("continue", "skip_rest"))

    def detail(self, pad: str, label: str, text: str, note: str = "") -> None:
        """`label: text` (a multi-line text printed as it is, as the original does), then the
        note, or the note the text's step output references call for."""
        note = note or _output_note(text)
        self.lines.append(f"{pad}{label}: {text}" + (f"  {note}" if note else ""))

    def text(self, value: str) -> str:
        return substitute_args(value, self.args).rstrip("\n")

    def resolved(self, line: str, results: dict) -> str:
        """A shell line as the plan shows it: `${arg}` substituted, then `$step.approved`."""
        return _approved(substitute_args(line, self.args), results)

    def policy(self, policy: ast.Policy, pad: str) -> None:
        if policy.timeout_ms is not ast.ABSENT:
            self.lines.append(f"{pad}timeout: {js.to_string(policy.timeout_ms)}ms")
        if policy.on_error in ("continue", "skip_rest"):
            self.lines.append(f"{pad}on_error: {policy.on_error}")
        retry = policy.retry
        if retry is not None and js.compare(retry.max, ">", 1):  # one attempt is no retry
            jitter = ", jitter" if retry.jitter else ""
            self.lines.append(f"{pad}retry: up to {js.to_string(retry.max)} attempts, "
                              f"{retry.backoff} backoff (base: {js.to_string(retry.delay_ms)}ms"
                              f"{jitter})")

    # stdin and references --------------------------------------------------------------------
    def stdin(self, pad: str, value: Any, results: dict) -> None:
        """A `stdin:` line only for a text with a step's stdout or json in it (as the original:
        a literal stdin, or one that is not text, is not shown)."""
        if not isinstance(value, str) or not OUTPUT_REF.search(value):
            return
        text = value.strip()
        note = "[output unknown at plan time]" if OUTPUT_REF.fullmatch(text) else \
            "[contains step output refs — unknown at plan time]"
        self.detail(pad, "stdin", text, note)

    def has_refs(self, text: str, results: dict) -> bool:
        return any(m[1] in results for m in REF.finditer(text))

    def synthetic(self, sid: str, value: Any, results: dict) -> Any:
        """An approval-only / no-op step's result: from a literal stdin, else unknown."""
        if isinstance(value, str):
            if WHOLE_REF.match(value.strip()) or self.has_refs(substitute_args(value, self.args),
                                                              results):
                return {"id": sid, "stdout": UNKNOWN, "json": UNKNOWN}
            value = substitute_args(value, self.args)
        return value_result(sid, value)

    # conditions ------------------------------------------------------------------------------
    def condition(self, when: ast.When | None, results: dict) -> bool | None:
        """True, False, or None when it depends on output only a real run has. The checker
        has made sure every reference names a step before this one."""
        if when is None:
            return True

        def resolve(ref: str, path: list[str]) -> Any:
            return _lookup(results[ref], path) if ref in results else UNKNOWN

        value = _value3(when.tree, resolve)
        return None if value is UNKNOWN else truthy(value)

    # execution kinds -------------------------------------------------------------------------
    def pipeline(self, pipeline: ast.PipelineText, sid: str, results: dict,
                 owner: str | None = None) -> str:
        """The pipeline text with `${arg}` substituted. One with `${arg}` or a step reference in
        it is checked here as it would run (the checker has checked the others): a stage
        whose name comes from a step's output cannot be checked, one whose arguments do has
        its name checked only."""
        shown = _approved(self.text(pipeline.text), results)
        if not _templated(pipeline.text):
            return shown
        span = pipeline.span
        try:
            parsed = parse_pipeline(shown, self.wf.path)
        except CompileError as exc:
            raise CompileError([Diagnostic("E210", f"Workflow step {sid} pipeline parse failed: "
                                           f"{exc.first.message}", span)]) from None
        for stage in parsed.stages:
            name = stage.name.text
            if OUTPUT_REF.search(name):
                self.deferred = True
            if self.has_refs(name, results):
                continue
            if any(self.has_refs(word.text, results) for word in stage.words):
                found = [d for d in check_stage(ast.Stage(stage.name, (), stage.span))
                         if isinstance(d, Diagnostic) and d.code == "E201"]
                command = COMMANDS.get(name)
            else:
                found = list(check_stage(stage))
                command = None if not found or isinstance(found[-1], Diagnostic) else found[-1].command
            problem = next((d for d in found if isinstance(d, Diagnostic)), None)
            if problem is not None:
                message = problem.message
                if message == f"Unknown command: {name}":  # the original dry run's words
                    message = (f"{owner or f'Workflow step {sid}'} pipeline references unknown "
                               f"command: {name}")
                raise CompileError([Diagnostic(problem.code, message, span, help=problem.help)])
            if command is not None and command.lowering in ("approve", "ask"):
                raise CompileError([halting_stage(sid, command, span)])
        return shown

    def parallel(self, par: ast.Parallel, number: str, pad: str, results: dict) -> None:
        """`wait:`, `timeout:`, then one `branch <id>: [kind] <text>` line per branch."""
        self.lines.append(f"{pad}wait: {par.wait}")
        if par.timeout_ms is not ast.ABSENT:
            self.lines.append(f"{pad}timeout: {js.to_string(par.timeout_ms)}ms")
        for branch in par.branches:
            if branch.pipeline is not None:
                shown = self.pipeline(branch.pipeline, branch.id, results,
                                      owner=f"Parallel branch {branch.id}")
                self.lines.append(f"{pad}branch {branch.id}: [pipeline] {_noted(shown)}")
            else:
                shown = self.resolved(branch.shell.line, results)
                self.lines.append(f"{pad}branch {branch.id}: [shell] {_noted(shown)}")
        for branch in par.branches:
            results[branch.id] = _Output()

    def for_each(self, loop: ast.ForEach, number: str, pad: str, results: dict) -> None:
        """The source, the loop variables, the batch size, then one line per sub-step."""
        # the source as written (not trimmed, its args not substituted), noted when its text
        # names a step's stdout or json, whether or not that step ran before (as the original)
        self.lines.append(f"{pad}for_each: {_noted(loop.source)}")
        self.lines.append(f"{pad}item_var: {loop.item_var}, index_var: {loop.index_var}")
        for name, value in (("batch_size", loop.batch_size), ("pause_ms", loop.pause_ms)):
            if value is not ast.ABSENT and js.truthy(value):  # as given (1 too), 0 left out
                self.lines.append(f"{pad}{name}: {js.to_string(value)}")
        self.lines.append(f"{pad}sub-steps: {len(loop.steps)}")
        scope = {**results, loop.item_var: _Output(), loop.index_var: _Output()}
        for index, sub in enumerate(loop.steps):
            head = f"{pad}  {index + 1}. {sub.id}  "
            if self.condition(sub.when, scope) is False:
                self.lines.append(f"{head}[skipped — condition: false]")
                scope[sub.id] = {"id": sub.id, "skipped": True}
                continue
            kind = sub.kind
            if isinstance(kind, ast.Shell):
                detail = f" run: {self.resolved(kind.line, scope)}"
            elif isinstance(kind, ast.PipelineStep):
                detail = f" pipeline: {self.pipeline(kind.pipeline, sub.id, scope)}"
            else:
                detail = ""
            self.lines.append(f"{head}[{_KIND_TAGS[kind.tag]}]{detail}")
            scope[sub.id] = _Output()


_KIND_TAGS = {"shell": "shell", "pipeline": "pipeline", "workflow": "workflow",
              "parallel": "parallel", "for_each": "for_each", "input": "input",
              "approval": "no-op", "noop": "no-op"}


OUTPUT_REF = re.compile(r"\$[A-Za-z0-9_-]+\.(?:stdout|json)")


PLAN_REF = re.compile(r"\$([A-Za-z0-9_-]+)\.(stdout|json|approved)")


def _approved(text: str, results: dict) -> str:
    """`$step.approved` of a step planned before this one, as the original plans it: `true`
    for an approval step (the plan takes the approved path), `false` for any other."""
    def one(m: re.Match) -> str:
        if m[2] != "approved" or m[1] not in results:
            return m[0]
        result = results[m[1]]
        approved = result.approved if isinstance(result, _Output) else \
            isinstance(result, dict) and result.get("approved") is True
        return "true" if approved else "false"

    return PLAN_REF.sub(one, text)


def _output_note(text: str) -> str:
    """What the original notes after a text with a step's stdout or json in it."""
    return "[contains step output refs — unknown at plan time]" if OUTPUT_REF.search(text) else ""


def _noted(text: str) -> str:
    note = _output_note(text)
    return f"{text}  {note}" if note else text


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
    for k, segment in enumerate(path):
        if value is UNKNOWN:
            return UNKNOWN
        if isinstance(value, dict) and any(v is UNKNOWN for v in value.values()):
            value = js.get_prop(value, segment)
            continue
        value = lookup(value, path[k:])  # a known value, walked as a run walks it
        break
    if value is UNKNOWN:
        return UNKNOWN
    return MISSING if value is js.UNDEFINED else value


def _value3(tree: Any, resolve) -> Any:
    """vm.core.condition's semantics, with UNKNOWN for what depends on unknown output (Kleene
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
