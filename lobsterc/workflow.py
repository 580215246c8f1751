"""Workflow files -> vm Program: the same bytecode as pipelines.

Steps become blocks in the step table; `when` becomes EVAL_COND + JUMP_IF_NOT; gates become
HALT_APPROVE / HALT_INPUT; pipeline steps compile their stages inline; for_each loops use
LOOP_BEGIN / LOOP_NEXT; sub-workflows are code regions entered by CALL and left by RETURN;
parallel branches are code regions that PARALLEL names, each left by END_BRANCH; retry /
timeout_ms / on_error wrap a step's execution in TRY / END_TRY.
"""

from __future__ import annotations

import os
from typing import Any

from lobsterc.check import check_pipeline
from lobsterc.codegen import Emitter, emit_stage
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.expr import compile_condition, condition_refs
from lobsterc.parse import parse_pipeline
from lobsterc.source import Span
from lobsterc.workflow_file import (WorkflowFile, is_approval, is_input, load_workflow_file,
                                    step_kind)
from vm.opcodes import Op
from vm.ops import (Branch, Call, Given, HaltSite, LoadStdin, Loop, Parallel, Policy, Retry,
                    Shell)
from vm.program import Program
from vm.refs import REF, WHOLE_REF

COND_REG = 1  # EVAL_COND result
ITEMS_REG = 0  # a pipeline step's items


def compile_workflow(path: str) -> Program:
    """Load, check and compile a workflow file (and the sub-workflows it calls)."""
    return compile_workflow_files(path)[0]


def compile_workflow_files(path: str) -> tuple[Program, list[str]]:
    """The program, and the real path of every file it was compiled from."""
    from lobsterc.check import check_file, refusal

    refused = refusal(check_file(path)[1])
    if refused is not None:
        raise refused
    wf = load_workflow_file(path)
    em = Emitter()
    em.registers = 2
    em.enter_file(os.path.basename(path))
    compiler = _Compiler(em, [os.path.realpath(path)])
    em.emit(Op.INIT_ARGS, em.const(arg_defaults(wf)), span=wf.span_of("args"))
    limit = _get(wf.data, "cost_limit")
    if isinstance(limit, dict):
        em.emit(Op.COST_LIMIT, em.const({"max_usd": limit["max_usd"],
                                         "action": limit.get("action", "warn")}),
                span=wf.span_of("cost_limit"))
    compiler.workflow(wf, prefix="")
    em.emit(Op.END_WORKFLOW, span=wf.span_of())
    compiler.emit_regions()
    compiler.emit_branches()
    files = [os.path.realpath(path)] + [chain[-1] for _, _, _, chain in compiler.regions]
    return em.program(os.path.basename(path), wf.source.text), files


def arg_defaults(wf: WorkflowFile) -> dict:
    args = _get(wf.data, "args") or {}
    return {name: spec["default"] for name, spec in args.items()
            if isinstance(spec, dict) and "default" in spec}


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    return mapping.get(key, default) if isinstance(mapping, dict) else default


class _Compiler:
    def __init__(self, em: Emitter, chain: list[str]) -> None:
        self.em = em
        self.chain = chain
        self.regions: list[tuple[str, WorkflowFile, str, list[str]]] = []  # pending sub-workflows
        self.region_calls: list[tuple[int, int]] = []  # (CALL pc, region index)
        self.branches: list[tuple] = []  # pending branch regions, see parallel()

    # file level ------------------------------------------------------------------------------
    def workflow(self, wf: WorkflowFile, prefix: str) -> None:
        data = wf.data
        self.wf = wf
        self.env = {k: v for k, v in (_get(data, "env") or {}).items() if isinstance(v, str)}
        self.cwd = _get(data, "cwd") if isinstance(_get(data, "cwd"), str) else None
        known: list[str] = []
        for index, step in enumerate(data["steps"]):
            self.step(step, ("steps", index), prefix, known)
            known.append(step["id"])

    def emit_regions(self) -> None:
        """Sub-workflow bodies go after the main program; each ends with RETURN."""
        starts = []
        while len(starts) < len(self.regions):
            call_id, wf, prefix, chain = self.regions[len(starts)]
            starts.append(len(self.em.code))
            self.em.enter_file(self.file_name(chain[-1]))
            sub = _Compiler(self.em, chain)
            sub.regions, sub.region_calls, sub.branches = (self.regions, self.region_calls,
                                                           self.branches)
            sub.workflow(wf, prefix)
            self.em.emit(Op.RETURN, self.em.const(call_id), span=wf.span_of())
        self.em.file = 0
        for pc, region in self.region_calls:
            self.em.patch(pc, starts[region])

    def file_name(self, path: str) -> str:
        """A sub-workflow's name in the file table: its path from the main file's directory."""
        base = os.path.dirname(self.chain[0])
        return os.path.relpath(path, base).replace(os.sep, "/")

    # one step --------------------------------------------------------------------------------
    def step(self, step: dict, at: tuple, prefix: str, known: list[str], loop: dict | None = None
             ) -> None:
        em, wf = self.em, self.wf
        sid = step["id"]
        label = f"{prefix}{sid}"
        first = len(em.code)
        span = wf.span_of(*at, "id")
        S = em.const(sid)
        scope = known + ([loop["item_var"], loop["index_var"]] if loop else [])
        self.check_refs(step, at, sid, scope)
        when_key = "when" if "when" in step else "condition" if "condition" in step else None
        skip_jump = None
        if when_key is not None:
            where = wf.span_of(*at, when_key)
            tree = compile_condition(step[when_key], where)
            self.check_tree_refs(tree, where, scope)
            em.emit(Op.EVAL_COND, COND_REG, em.const(tree), span=where)
            skip_jump = em.emit(Op.JUMP_IF_NOT, COND_REG, 0, span=where)
        kind = step_kind(step)
        policy = self.policy(step) if kind != "input" else None
        try_pc = em.emit(Op.TRY, S, em.const(policy), 0, span=span) if policy else None
        block_label, block_first = label, first
        if kind == "for_each":
            block_first = self.for_each(step, at, label, scope, first)
            block_label = f"{label}/(next)"  # ids never hold parentheses: no clash with a sub-step
        elif kind == "input":
            em.emit(Op.HALT_INPUT, ITEMS_REG, em.halt(self.input_site(step, label)),
                    span=wf.span_of(*at, "input"))
        else:
            self.execute(step, at, kind, S, label)
        end_try = None
        if try_pc is not None:
            self.patch(try_pc, len(em.code))
            end_try = em.emit(Op.END_TRY, S, 0, span=span)
        if kind not in ("for_each", "input") and is_approval(step.get("approval")):
            em.emit(Op.HALT_APPROVE, ITEMS_REG, em.halt(self.approval_site(step, label)),
                    span=wf.span_of(*at, "approval"))
        if skip_jump is not None:
            jump = em.emit(Op.JUMP, 0, span=span)
            self.patch(skip_jump, len(em.code))
            em.emit(Op.SKIP_STEP, S, span=span)
            self.patch(jump, len(em.code))
        if end_try is not None:
            self.patch(end_try, len(em.code))  # on_error continue / skip_rest land here
        em.step(block_label, block_first, span)

    def patch(self, pc: int, target: int) -> None:
        self.em.patch(pc, target)

    def execute(self, step: dict, at: tuple, kind: str, S: int, label: str) -> None:
        em, wf = self.em, self.wf
        if kind == "shell":
            key = "run" if isinstance(step.get("run"), str) else "command"
            em.emit(Op.SHELL, S, em.const(self.shell_spec(step, step[key])),
                    span=wf.span_of(*at, key))
        elif kind == "pipeline":
            self.pipeline(step, at, S, label)
        elif kind == "workflow":
            self.call(step, at, S, label)
        elif kind == "parallel":
            self.parallel(step, at, S, label)
        else:  # approval-only or no-op: a synthetic result from stdin
            em.emit(Op.SET_RESULT, S, em.const(step.get("stdin")),
                    span=wf.span_of(*at, "id"))

    def shell_spec(self, step: dict, line: str) -> Shell:
        return Shell(line, step.get("stdin"), self.step_env(step), self.step_cwd(step))

    def step_env(self, step: dict) -> dict:
        env = dict(self.env)
        env.update({k: v for k, v in (step.get("env") or {}).items() if isinstance(v, str)})
        return env

    def step_cwd(self, step: dict) -> str | None:
        cwd = step.get("cwd")
        return cwd if isinstance(cwd, str) else self.cwd

    def policy(self, step: dict) -> Policy | None:
        retry = step.get("retry") if isinstance(step.get("retry"), dict) else None
        if retry is None and "timeout_ms" not in step and "on_error" not in step:
            return None
        rule = None
        if retry is not None:
            rule = Retry(retry.get("max", 1), retry.get("backoff", "fixed"),
                         retry.get("delay_ms", 1000), retry.get("max_delay_ms", 30000),
                         retry.get("jitter", False) is True)
        return Policy(step.get("on_error", "stop"), step.get("timeout_ms"), rule)

    # pipelines -------------------------------------------------------------------------------
    def pipeline_stages(self, text: str, at: tuple, sid: str, key: str = "pipeline"):
        span = self.wf.span_of(*at, key)
        try:
            parsed = parse_pipeline(text, self.wf.path)
        except CompileError as exc:
            raise CompileError([Diagnostic("E210", f"Workflow step {sid} pipeline parse failed: "
                                           f"{exc.first.message}", span)]) from None
        bound, diags = check_pipeline(parsed)
        if diags:
            raise CompileError([Diagnostic(d.code, d.message, span, help=d.help) for d in diags])
        for item in bound:
            if item.command.lowering == "approve":
                raise CompileError([Diagnostic(
                    "E214", f"Workflow step {sid} halted for approval inside pipeline stage "
                    f"{item.command.name}. Use a separate approval step in the workflow file.",
                    span)])
            if item.command.lowering == "ask":
                raise CompileError([Diagnostic(
                    "E214", f"Workflow step {sid} halted before completion at pipeline stage "
                    f"{item.command.name}", span)])
        return bound, span

    def pipeline(self, step: dict, at: tuple, S: int, label: str) -> None:
        bound, span = self.pipeline_stages(step["pipeline"], at, step["id"])
        load = LoadStdin(step.get("stdin"), self.step_env(step), self.step_cwd(step))
        self.emit_pipeline(bound, span, load, S, label)

    def emit_pipeline(self, bound, span: Span, load: LoadStdin, S: int, label: str) -> None:
        em = self.em
        em.emit(Op.LOAD_STDIN, ITEMS_REG, em.const(load), span=span)
        for index, item in enumerate(bound, start=1):
            emit_stage(em, item, ITEMS_REG, f"{label}:{index}", templated=True)
            # stage spans are relative to the pipeline text; the file's position is the value's
            em.source_map[-1] = em.loc(span)
        em.emit(Op.STORE_PIPELINE, S, ITEMS_REG, span=span)

    # sub-workflows ---------------------------------------------------------------------------
    def call(self, step: dict, at: tuple, S: int, label: str) -> None:
        em, wf = self.em, self.wf
        target = step["workflow"]
        span = wf.span_of(*at, "workflow")
        if "$" in target:
            raise CompileError([Diagnostic(
                "E215", f"Workflow step {step['id']} workflow path must be a literal path "
                "(it is resolved when the file is compiled)", span)])
        path = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(wf.path)), target))
        if not os.path.isfile(path):
            raise CompileError([Diagnostic("E210", f"Workflow step {step['id']} workflow file not "
                                           f"found: {target}", span)])
        if path in self.chain:
            raise CompileError([Diagnostic("E216", f"Workflow step {step['id']} creates a cycle: "
                                           f"{target} is already being executed", span)])
        child = load_workflow_file(path)
        defaults = arg_defaults(child)
        args = step.get("workflow_args") if isinstance(step.get("workflow_args"), dict) else {}
        spec = Call(args, defaults, self.step_env(step), self.step_cwd(step))
        pc = em.emit(Op.CALL, S, em.const(spec), 0, span=span)
        self.region_calls.append((pc, len(self.regions)))
        self.regions.append((step["id"], child, f"{label}/", [*self.chain, path]))

    # loops -----------------------------------------------------------------------------------
    def for_each(self, step: dict, at: tuple, label: str, scope: list[str], first: int) -> int:
        """Emit the loop; register its header and sub-step blocks; return where the tail
        block (LOOP_NEXT and what follows) begins."""
        em, wf = self.em, self.wf
        S = em.const(step["id"])
        loop = Loop(step["for_each"], step.get("item_var", "item"), step.get("index_var", "index"),
                    step.get("batch_size", 1), step.get("pause_ms", 0),
                    tuple(sub["id"] for sub in step["steps"]))
        names = {"item_var": loop.item_var, "index_var": loop.index_var}
        span = wf.span_of(*at, "for_each")
        begin = em.emit(Op.LOOP_BEGIN, S, em.const(loop), 0, span=span)
        em.step(label, first, span)
        body = len(em.code)
        inner: list[str] = list(scope)
        for index, sub in enumerate(step["steps"]):
            self.step(sub, (*at, "steps", index), f"{label}/", inner, loop=names)
            inner.append(sub["id"])
        tail = em.emit(Op.LOOP_NEXT, S, body, span=span)
        self.patch(begin, len(em.code))
        return tail

    # gates -----------------------------------------------------------------------------------
    def approval_site(self, step: dict, label: str) -> HaltSite:
        approval = step["approval"]
        given: dict[str, Any] = {}
        rules: dict[str, Any] = {}
        if isinstance(approval, str):
            prompt = None if approval.strip() in ("", "required") else approval
        elif isinstance(approval, dict):
            prompt = approval.get("prompt") if isinstance(approval.get("prompt"), str) else None
            for key, field_name in (("items", "items"), ("preview", "preview_text")):
                if key in approval:
                    given[field_name] = Given(approval[key])
            for snake, camel in (("initiated_by", "initiatedBy"),
                                 ("required_approver", "requiredApprover"),
                                 ("require_different_approver", "requireDifferentApprover")):
                rules[snake] = approval.get(snake, approval.get(camel))
        else:
            prompt = None
        return HaltSite(label, "approval", prompt or f"Approve {step['id']}?", step=step["id"],
                        **rules, **given)

    def input_site(self, step: dict, label: str) -> HaltSite:
        spec = step["input"]
        return HaltSite(label, "input", spec["prompt"], schema=spec.get("responseSchema"),
                        step=step["id"],
                        defaults=Given(spec["defaults"]) if "defaults" in spec else None,
                        stdin=Given(step["stdin"]) if "stdin" in step else None)

    # parallel --------------------------------------------------------------------------------
    def parallel(self, step: dict, at: tuple, S: int, label: str) -> None:
        """PARALLEL names one code region per branch; emit_branches() emits them at the end
        of the program and fills in where each starts."""
        em, par = self.em, step["parallel"]
        branches = []
        for index, branch in enumerate(par["branches"]):
            where = (*at, "parallel", "branches", index)
            env = self.step_env(step)
            env.update({k: v for k, v in (branch.get("env") or {}).items() if isinstance(v, str)})
            cwd = branch.get("cwd") if isinstance(branch.get("cwd"), str) else self.step_cwd(step)
            if isinstance(branch.get("pipeline"), str):
                bound, span = self.pipeline_stages(branch["pipeline"], where, branch["id"])
                body = ("pipeline", bound, span, LoadStdin(branch.get("stdin"), env, cwd))
            else:
                key = "run" if isinstance(branch.get("run"), str) else "command"
                body = ("run", Shell(branch[key], branch.get("stdin"), env, cwd),
                        self.wf.span_of(*where, key))
            branches.append((branch["id"], body))
        pc = em.emit(Op.PARALLEL, S, 0, span=self.wf.span_of(*at, "parallel"))
        spec = (par.get("wait", "all"), par.get("timeout_ms"))
        self.branches.append((pc, spec, branches, f"{label}/", em.file))

    def emit_branches(self) -> None:
        em = self.em
        for pc, (wait, timeout_ms), branches, prefix, file in self.branches:
            em.file = file
            regions = []
            for branch_id, body in branches:
                regions.append(Branch(branch_id, len(em.code)))
                S = em.const(branch_id)
                if body[0] == "pipeline":
                    _, bound, span, load = body
                    self.emit_pipeline(bound, span, load, S, prefix + branch_id)
                else:
                    _, shell, span = body
                    em.emit(Op.SHELL, S, em.const(shell), span=span)
                em.emit(Op.END_BRANCH, S, span=span)
            ins = em.code[pc]
            em.code[pc] = type(ins)(ins.op, ins.a, em.const(Parallel(wait, timeout_ms, regions)))
        em.file = 0

    # references ------------------------------------------------------------------------------
    def check_refs(self, step: dict, at: tuple, sid: str, scope: list[str]) -> None:
        """Strict references (stdin, for_each) must name an earlier step: a compile error with
        a position, not a runtime surprise."""
        for key in ("stdin", "for_each"):
            value = step.get(key)
            if isinstance(value, str):
                m = WHOLE_REF.match(value.strip())
                if m and m[1] not in scope:
                    self.unknown_ref(m[1], m[2][1:], self.wf.span_of(*at, key), scope)

    def check_tree_refs(self, tree: Any, span: Span, scope: list[str]) -> None:
        for ref in condition_refs(tree):
            if ref not in scope:
                self.unknown_ref(ref, "", span, scope)

    def unknown_ref(self, ref: str, path: str, span: Span, scope: list[str]) -> None:
        from lobsterc.check import did_you_mean

        text = f"{ref}.{path}" if path else ref
        raise CompileError([Diagnostic("E211", f"Unknown step reference: {text}", span,
                                       help=did_you_mean(ref, scope))])


def template_refs(text: str) -> list[str]:
    return [m[1] for m in REF.finditer(text)]
