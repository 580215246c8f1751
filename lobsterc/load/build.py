"""A validated workflow document -> its AST (lobsterc.syntax.ast), once. Never raises: what it cannot
make sense of becomes a node that lobsterc.check.checker reports. `load` reads a file and the files its
`workflow:` steps call, each once."""

from __future__ import annotations

import os
from typing import Any

from attrs import frozen

from lobsterc.syntax import ast
from lobsterc.syntax.ast import ABSENT, Loc
from lobsterc.check.checker import MAX_ERRORS
from lobsterc.check.stages import check_pipeline
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax.expr import compile_condition
from lobsterc.load import Document, parse_text, read_text
from lobsterc.load.fields import PARALLEL, RETRY, STEP, Shape, default
from lobsterc.syntax.parse import parse_pipeline
from lobsterc.check.problems import lint_problems, validated
from lobsterc.check.values import is_approval, step_kind

__all__ = ["Loaded", "Library", "load", "build"]


@frozen
class Loaded:
    """A workflow file as far as it loads: its AST, or None when a problem stops it, and the
    diagnostics of loading it (a syntax error, the first structural problem; for lint also
    every repeated id and invalid responseSchema)."""

    path: str
    workflow: ast.Workflow | None
    diagnostics: tuple[Diagnostic, ...] = ()
    real: str = ""  # the real path of the file


class Library:
    """The files of one load by real path, each loaded once (a file may call itself)."""

    def __init__(self) -> None:
        self.files: dict[str, Loaded | None] = {}  # None while the file is being built

    def get(self, path: str) -> Loaded | None:
        return self.files.get(path)

    def load(self, path: str) -> None:
        if path not in self.files and os.path.isfile(path):
            load(path, library=self)


def load(path: str, *, lenient: bool = False, library: Library | None = None,
         text: str | None = None) -> Loaded:
    """Read, parse, validate and build a workflow file and the files it calls. `lenient` (lint)
    reports every problem of the file's structure (lobsterc.check.problems.lint_problems).
    `text` stands for the file's text (an editor's unsaved buffer); callees are read from disk."""
    if library is None:
        library = Library()
    real = os.path.realpath(path)
    library.files.setdefault(real, None)
    loaded = _load(path, real, lenient, library, text)
    library.files[real] = loaded
    return loaded


def _load(path: str, real: str, lenient: bool, library: Library,
          text: str | None = None) -> Loaded:
    try:
        if text is None:
            text = read_text(path)
        if not lenient:
            doc = validated(text, path)
            return Loaded(path, build(doc, library), (), real)
        doc = parse_text(text, path)
        diags, problem = lint_problems(doc)
    except CompileError as exc:
        return Loaded(path, None, tuple(exc.diagnostics), real)
    if problem is not None:
        return Loaded(path, None, (*diags, problem), real)
    return Loaded(path, build(doc, library), tuple(diags), real)


def build(doc: Document, library: Library | None = None) -> ast.Workflow:
    """The AST of a document that validated; sub-workflows are loaded into `library`."""
    return _Builder(doc, Library() if library is None else library).workflow()


def _get(value: Any, key: str, default: Any = None) -> Any:
    return value.get(key, default) if isinstance(value, dict) else default


def _field(value: Any, shape: Shape, name: str) -> Any:
    """A field of an object as written, else its default in the field table (ABSENT: none)."""
    if isinstance(value, dict) and name in value:
        return value[name]
    return default(shape, name)


def _strings_of(mapping: Any) -> dict[str, str]:
    return {k: v for k, v in mapping.items() if isinstance(v, str)} if isinstance(mapping, dict) else {}


def checkpoint_ttl_ms(value: Any) -> int | None:
    """A workflow's `checkpoint_ttl` in ms: a duration ("30m", "7d", "1h30m") or a positive
    integer of ms, within vm.core.bounds.CHECKPOINT_TTL; None when absent or not such a value
    (validation has refused that)."""
    from vm.core import bounds

    if isinstance(value, float):
        return None
    try:
        return bounds.CHECKPOINT_TTL.parse(value, "checkpoint_ttl")
    except bounds.BoundError:
        return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Builder:
    def __init__(self, doc: Document, library: Library) -> None:
        self.doc = doc
        self.library = library
        self.errors = 0  # in the pipelines built so far (check_file stops at MAX_ERRORS)

    def loc(self, *at: Any) -> Loc:
        return Loc(self.doc, at)

    def workflow(self) -> ast.Workflow:
        data = self.doc.data if isinstance(self.doc.data, dict) else {}
        args = data.get("args") if isinstance(data.get("args"), dict) else {}
        defaults = {name: spec["default"] for name, spec in args.items()
                    if isinstance(spec, dict) and "default" in spec}
        steps = data.get("steps") if isinstance(data.get("steps"), list) else []
        limit = data.get("cost_limit")
        return ast.Workflow(
            path=self.doc.path, name=data.get("name", ABSENT),
            description=data.get("description", ABSENT), args=args, defaults=defaults,
            env=_strings_of(data.get("env")), cwd=_str_or_none(data.get("cwd")),
            steps=self.steps(steps, ("steps",)),
            cost_limit=limit if isinstance(limit, dict) else None,
            loc=self.loc(), library=self.library,
            checkpoint_ttl_ms=checkpoint_ttl_ms(data.get("checkpoint_ttl")))

    def steps(self, steps: Any, at: tuple) -> tuple[ast.Step, ...]:
        if not isinstance(steps, list):  # the checker reports it; the AST holds no steps
            return ()
        return tuple(self.step(step, (*at, index)) for index, step in enumerate(steps)
                     if isinstance(step, dict))

    def step(self, step: dict, at: tuple) -> ast.Step:
        sid = str(step.get("id", ""))
        kind = step_kind(step)
        when_key = "when" if "when" in step else "condition" if "condition" in step else None
        approval = None
        if "approval" in step and kind not in ("for_each", "input") and is_approval(step["approval"]):
            approval = self.approval(sid, step["approval"], at)
        cwd = step.get("cwd")
        return ast.Step(
            sid, self.kind(kind, step, at), step.get("stdin", ABSENT),
            self.when(step[when_key], when_key, at) if when_key else None, approval,
            None if kind == "input" or not ("timeout_ms" in step or "retry" in step
                                            or "on_error" in step) else self.policy(step),
            _strings_of(step["env"]) if "env" in step else {},
            cwd if isinstance(cwd, str) else None, step.get("effects", ABSENT), Loc(self.doc, at))

    def kind(self, kind: str, step: dict, at: tuple) -> ast.StepKind:
        if kind == "shell":
            return self.shell(step)
        if kind == "pipeline":
            return ast.PipelineStep(self.pipeline(step["pipeline"], (*at, "pipeline")))
        if kind == "workflow":
            return self.call(step, at)
        if kind == "parallel":
            return self.parallel(step["parallel"], (*at, "parallel"))
        if kind == "for_each":
            return ast.ForEach(
                source=step["for_each"], item_var=_field(step, STEP, "item_var"),
                index_var=_field(step, STEP, "index_var"),
                batch_size=step.get("batch_size", ast.ABSENT),
                pause_ms=step.get("pause_ms", ast.ABSENT),
                steps=self.steps(_get(step, "steps", []), (*at, "steps")),
                loc=self.loc(*at, "for_each"))
        if kind == "input":
            spec = step["input"]
            return ast.InputGate(prompt=_get(spec, "prompt", ""),
                                 schema=_get(spec, "responseSchema"),
                                 defaults=_get(spec, "defaults", ABSENT),
                                 loc=self.loc(*at, "input"))
        return ast.NoOp(kind)

    def shell(self, step: dict) -> ast.Shell:
        key = "run" if isinstance(step.get("run"), str) else "command"
        return ast.Shell(str(step.get(key, "")), key)

    def pipeline(self, text: str, at: tuple) -> ast.PipelineText:
        """A pipeline step's text, parsed and bound to its commands. Past MAX_ERRORS errors in
        this file's pipelines it is left unparsed: the file is refused, and check_file stops
        before it reaches this step (so a refusal costs no more than MAX_ERRORS errors)."""
        if self.errors >= MAX_ERRORS:
            return ast.PipelineText(text, None, self.loc(*at))
        try:
            parsed = parse_pipeline(text, self.doc.path)
        except CompileError as exc:
            self.errors += 1
            return ast.PipelineText(text, None, self.loc(*at), syntax=tuple(exc.diagnostics))
        bound, problems = check_pipeline(parsed)
        self.errors += sum(problem.severity == "error" for problem in problems)
        return ast.PipelineText(text, parsed, self.loc(*at), tuple(bound), tuple(problems))

    def when(self, value: Any, key: str, at: tuple) -> ast.When:
        loc = self.loc(*at, key)
        try:
            return ast.When(key, value, compile_condition(value, None), loc)
        except CompileError:  # worded again with its place in the file (spans cost a little)
            try:
                compile_condition(value, loc.span())
            except CompileError as exc:
                return ast.When(key, value, None, loc, tuple(exc.diagnostics))
            raise

    def call(self, step: dict, at: tuple) -> ast.SubWorkflow:
        target = step["workflow"]
        args = step.get("workflow_args")
        path = None
        if "$" not in target:
            base = os.path.dirname(os.path.abspath(self.doc.path))
            path = os.path.realpath(os.path.join(base, target))
            self.library.load(path)
        return ast.SubWorkflow(target, args if isinstance(args, dict) else {}, path,
                               self.loc(*at, "workflow"))

    def parallel(self, par: dict, at: tuple) -> ast.Parallel:
        branches = []
        for index, branch in enumerate(_get(par, "branches", [])):
            if not isinstance(branch, dict):
                continue
            where = (*at, "branches", index)
            pipeline = branch.get("pipeline")
            is_pipeline = isinstance(pipeline, str) and pipeline != ""
            branches.append(ast.Branch(
                id=str(branch.get("id", "")), shell=None if is_pipeline else self.shell(branch),
                pipeline=self.pipeline(pipeline, (*where, "pipeline")) if is_pipeline else None,
                stdin=branch.get("stdin", ABSENT), env=_strings_of(branch.get("env")),
                cwd=_str_or_none(branch.get("cwd")), loc=self.loc(*where)))
        return ast.Parallel(wait=_field(par, PARALLEL, "wait"),
                            timeout_ms=_field(par, PARALLEL, "timeout_ms"),
                            branches=tuple(branches), loc=self.loc(*at))

    def approval(self, sid: str, value: Any, at: tuple) -> ast.Approval:
        config: dict[str, Any] = {}
        written = None
        if isinstance(value, str):  # only the exact word `required` asks for the default
            written = None if value == "required" or not value.strip() else value
        elif isinstance(value, dict):
            written = _str_or_none(value.get("prompt"))
            for key in ("items", "preview"):
                if key in value:
                    config[key] = value[key]
            for snake, camel in (("initiated_by", "initiatedBy"),
                                 ("required_approver", "requiredApprover"),
                                 ("require_different_approver", "requireDifferentApprover")):
                chosen = value.get(camel)  # the camelCase spelling wins, as the original's
                if chosen is None:
                    chosen = value.get(snake)
                if chosen is not None:
                    config[camel] = chosen
        prompt = f"Approve {sid}?" if written is None else written  # "" is kept, as written
        return ast.Approval(written=written, prompt=prompt, config=config,
                            loc=self.loc(*at, "approval"))

    def policy(self, step: dict) -> ast.Policy | None:
        retry = step.get("retry")
        if not isinstance(retry, dict):
            retry = None
        if retry is None and "timeout_ms" not in step and "on_error" not in step:
            return None
        return ast.Policy(
            timeout_ms=step.get("timeout_ms", ABSENT), on_error=step.get("on_error", ABSENT),
            retry=None if retry is None else ast.Retry(
                max=_field(retry, RETRY, "max"), backoff=_field(retry, RETRY, "backoff"),
                delay_ms=_field(retry, RETRY, "delay_ms"),
                max_delay_ms=_field(retry, RETRY, "max_delay_ms"),
                jitter=_field(retry, RETRY, "jitter") is True))
