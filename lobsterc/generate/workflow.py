"""Workflow files -> vm Program: the same bytecode as pipelines, generated from the checked AST
(lobsterc.syntax.ast; lobsterc.check.checker has refused anything wrong before a single instruction is made).

Steps become blocks in the step table; `when` becomes EVAL_COND + JUMP_IF_NOT; gates become
HALT_APPROVE / HALT_INPUT; pipeline steps compile their stages inline; for_each loops use
LOOP_BEGIN / LOOP_NEXT; sub-workflows are code regions entered by CALL and left by RETURN;
parallel branches are code regions that PARALLEL names, each left by END_BRANCH; retry /
timeout_ms / on_error wrap a step's execution in TRY / END_TRY.
"""

from __future__ import annotations

import os
from typing import Any

from lobsterc.syntax import ast
from lobsterc.load.fields import COST_LIMIT, STEP, default
from lobsterc.syntax.ast import ABSENT
from lobsterc.check.checker import check_file, refusal
from lobsterc.generate.codegen import Emitter, emit_stage
from lobsterc.syntax.source import Span
from vm.isa.opcodes import Op
from vm.isa.ops import (ApproverRules, Branch, Call, Given, LoadStdin, Loop, Parallel, Policy,
                       Retry, Shell, StepApproval, StepInput, StepValue)
from vm.isa.program import Program

COND_REG = 1  # EVAL_COND result
ITEMS_REG = 0  # a pipeline step's items


def compile_workflow(path: str, *, text: str | None = None) -> Program:
    """Load, check and compile a workflow file (and the sub-workflows it calls); `text` stands
    for the file's own text (an editor's unsaved buffer)."""
    return compile_workflow_files(path, text=text)[0]


def compile_workflow_files(path: str, *, text: str | None = None
                           ) -> tuple[Program, list[str]]:
    """The program, and the real path of every file it was compiled from."""
    loaded, diags = check_file(path, text=text)
    refused = refusal(diags)
    if refused is not None:
        raise refused
    wf = loaded.workflow
    em = Emitter()
    em.registers = 2
    main = os.path.basename(loaded.real)  # the file table names files from the real directory
    em.enter_file(main)
    compiler = _Compiler(em, [loaded.real])
    em.emit(Op.INIT_ARGS, em.const(dict(wf.defaults)), span=wf.loc.span("args"))
    _cost_limit(em, wf)
    compiler.workflow(wf, prefix="")
    em.emit(Op.END_WORKFLOW, span=wf.loc.span())
    compiler.emit_regions()
    compiler.emit_branches()
    files = [loaded.real] + [chain[-1] for _, _, _, chain in compiler.regions]
    return em.program(main, wf.source.text, wf.checkpoint_ttl_ms), files


def _cost_limit(em: Emitter, wf: ast.Workflow) -> None:
    """COST_LIMIT of a workflow that sets `cost_limit` (a sub-workflow's heads its region)."""
    limit = wf.cost_limit
    if limit is not None:
        action = limit.get("action", default(COST_LIMIT, "action"))
        em.emit(Op.COST_LIMIT, em.const({"max_usd": limit["max_usd"], "action": action}),
                span=wf.loc.span("cost_limit"))


def _given(value: Any) -> Any:
    """A value the file may leave out: None where it does."""
    return None if value is ABSENT else value


class _Compiler:
    def __init__(self, em: Emitter, chain: list[str]) -> None:
        self.em = em
        self.chain = chain
        self.regions: list[tuple[str, ast.Workflow, str, list[str]]] = []  # pending sub-workflows
        self.region_calls: list[tuple[int, int]] = []  # (CALL pc, region index)
        self.branches: list[tuple] = []  # pending branch regions, see parallel()
        self.env: dict[str, str] = {}
        self.cwd: str | None = None

    # file level ------------------------------------------------------------------------------
    def workflow(self, wf: ast.Workflow, prefix: str) -> None:
        self.wf = wf
        self.env = dict(wf.env)
        self.cwd = wf.cwd
        for step in wf.steps:
            self.step(step, prefix)

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
            _cost_limit(self.em, wf)
            sub.workflow(wf, prefix)
            self.em.emit(Op.RETURN, self.em.const(call_id), span=wf.loc.span())
        self.em.file = 0
        for pc, region in self.region_calls:
            self.em.patch(pc, starts[region])

    def file_name(self, path: str) -> str:
        """A sub-workflow's name in the file table: its path from the main file's real
        directory (relative, so that a program holds no absolute path; a run names it in
        full from that directory, vm.core.source.located)."""
        base = os.path.dirname(self.chain[0])
        return os.path.relpath(path, base).replace(os.sep, "/")

    # one step --------------------------------------------------------------------------------
    def step(self, step: ast.Step, prefix: str) -> None:
        em = self.em
        sid = step.id
        label = f"{prefix}{sid}"
        first = len(em.code)
        span = step.span
        S = em.const(sid)
        skip_jump = None
        if step.when is not None:
            where = step.when.span
            em.emit(Op.EVAL_COND, COND_REG, em.const(step.when.tree), span=where)
            skip_jump = em.emit(Op.JUMP_IF_NOT, COND_REG, 0, span=where)
        kind = step.kind
        policy = self.policy(step.policy) if step.policy is not None else None
        try_pc = em.emit(Op.TRY, S, em.const(policy), 0, span=span) if policy else None
        block_label, block_first = label, first
        if isinstance(kind, ast.ForEach):
            block_first = self.for_each(step, kind, label, first)
            block_label = f"{label}/(next)"  # ids never hold parentheses: no clash with a sub-step
        elif isinstance(kind, ast.InputGate):
            em.emit(Op.HALT_INPUT, ITEMS_REG, em.halt(self.input_site(step, kind, label)),
                    span=kind.loc.span())
        else:
            # the approval right after the step's value finishes the step; after a policy's
            # END_TRY the step has finished at its value
            self.execute(step, kind, S, label, gated=step.approval is not None and not policy)
        end_try = None
        if try_pc is not None:
            em.patch(try_pc, len(em.code))
            end_try = em.emit(Op.END_TRY, S, 0, span=span)
        if step.approval is not None:
            em.emit(Op.HALT_APPROVE, ITEMS_REG, em.halt(self.approval_site(step, label)),
                    span=step.approval.loc.span())
        if skip_jump is not None:
            jump = em.emit(Op.JUMP, 0, span=span)
            em.patch(skip_jump, len(em.code))
            em.emit(Op.SKIP_STEP, S, span=span)
            em.patch(jump, len(em.code))
        if end_try is not None:
            em.patch(end_try, len(em.code))  # on_error continue / skip_rest land here
        em.step(block_label, block_first, span)

    def execute(self, step: ast.Step, kind: ast.StepKind, S: int, label: str,
                gated: bool = False) -> None:
        em = self.em
        if isinstance(kind, ast.Shell):
            em.emit(Op.SHELL, S, em.const(Shell(kind.line, _given(step.stdin), self.step_env(step),
                                                self.step_cwd(step))),
                    span=step.loc.span(kind.key))
        elif isinstance(kind, ast.PipelineStep):
            load = LoadStdin(_given(step.stdin), self.step_env(step), self.step_cwd(step))
            self.emit_pipeline(kind.pipeline, load, S, label, step.id)
        elif isinstance(kind, ast.SubWorkflow):
            self.call(step, kind, S, label)
        elif isinstance(kind, ast.Parallel):
            self.parallel(step, kind, S, label)
        else:  # approval-only or no-op: a synthetic result from stdin
            value = StepValue(_given(step.stdin), gated)
            em.emit(Op.SET_RESULT, S, em.const(value), span=step.span)

    def step_env(self, step: ast.Step) -> dict:
        env = dict(self.env)
        env.update(step.env)
        return env

    def step_cwd(self, step: ast.Step) -> str | None:
        return step.cwd if step.cwd is not None else self.cwd

    @staticmethod
    def policy(policy: ast.Policy) -> Policy | None:
        if policy.retry is None and policy.timeout_ms is ABSENT and policy.on_error is ABSENT:
            return None
        rule = policy.retry
        on_error = default(STEP, "on_error") if policy.on_error is ABSENT else policy.on_error
        return Policy(on_error, _given(policy.timeout_ms), None if rule is None else Retry(
            rule.max, rule.backoff, rule.delay_ms, rule.max_delay_ms, rule.jitter))

    # pipelines -------------------------------------------------------------------------------
    def emit_pipeline(self, pipeline: ast.PipelineText, load: LoadStdin, S: int,
                      label: str, owner: str) -> None:
        """A pipeline of step (or parallel branch) `owner`, its stages labelled `label:N`."""
        em = self.em
        span = pipeline.span
        em.emit(Op.LOAD_STDIN, ITEMS_REG, em.const(load), span=span)
        for index, item in enumerate(pipeline.bound, start=1):
            emit_stage(em, item, ITEMS_REG, f"{label}:{index}", templated=True,
                       in_step=owner)
            # stage spans are relative to the pipeline text; the file's position is the value's
            em.source_map[-1] = em.loc(span)
        em.emit(Op.STORE_PIPELINE, S, ITEMS_REG, span=span)

    # sub-workflows ---------------------------------------------------------------------------
    def call(self, step: ast.Step, kind: ast.SubWorkflow, S: int, label: str) -> None:
        em = self.em
        child = self.wf.callee(kind).workflow
        spec = Call(kind.args, dict(child.defaults), self.step_env(step), self.step_cwd(step))
        pc = em.emit(Op.CALL, S, em.const(spec), 0, span=kind.loc.span())
        self.region_calls.append((pc, len(self.regions)))
        self.regions.append((step.id, child, f"{label}/", [*self.chain, kind.path]))

    # loops -----------------------------------------------------------------------------------
    def for_each(self, step: ast.Step, kind: ast.ForEach, label: str, first: int) -> int:
        """Emit the loop; register its header and sub-step blocks; return where the tail
        block (LOOP_NEXT and what follows) begins."""
        em = self.em
        S = em.const(step.id)
        batch_size, pause_ms = (default(STEP, name) if value is ABSENT else value for name, value
                                in (("batch_size", kind.batch_size), ("pause_ms", kind.pause_ms)))
        loop = Loop(kind.source, kind.item_var, kind.index_var, batch_size, pause_ms,
                    tuple(sub.id for sub in kind.steps))
        span = kind.loc.span()
        begin = em.emit(Op.LOOP_BEGIN, S, em.const(loop), 0, span=span)
        em.step(label, first, span)
        body = len(em.code)
        # the loop's own env and cwd reach its sub-steps (a sub-step's own still win)
        outer = self.env, self.cwd
        self.env, self.cwd = self.step_env(step), self.step_cwd(step)
        for sub in kind.steps:
            self.step(sub, f"{label}/")
        self.env, self.cwd = outer
        tail = em.emit(Op.LOOP_NEXT, S, body, span=span)
        em.patch(begin, len(em.code))
        return tail

    # gates -----------------------------------------------------------------------------------
    @staticmethod
    def approval_site(step: ast.Step, label: str) -> StepApproval:
        approval = step.approval
        config = approval.config
        rules = ApproverRules(config.get("initiatedBy"), config.get("requiredApprover"),
                              config.get("requireDifferentApprover"))
        return StepApproval(label, approval.prompt, step.id,
                            items=Given(config["items"]) if "items" in config else None,
                            preview=Given(config["preview"]) if "preview" in config else None,
                            approvers=rules)

    @staticmethod
    def input_site(step: ast.Step, kind: ast.InputGate, label: str) -> StepInput:
        return StepInput(label, kind.prompt, step.id, schema=kind.schema,
                         defaults=None if kind.defaults is ABSENT else Given(kind.defaults),
                         stdin=None if step.stdin is ABSENT else Given(step.stdin))

    # parallel --------------------------------------------------------------------------------
    def parallel(self, step: ast.Step, kind: ast.Parallel, S: int, label: str) -> None:
        """PARALLEL names one code region per branch; emit_branches() emits them at the end
        of the program and fills in where each starts."""
        em = self.em
        branches = []
        for branch in kind.branches:
            env = self.step_env(step)
            env.update(branch.env)
            cwd = branch.cwd if branch.cwd is not None else self.step_cwd(step)
            stdin = _given(branch.stdin)
            if branch.pipeline is not None:
                body = ("pipeline", branch.pipeline, LoadStdin(stdin, env, cwd))
            else:
                body = ("run", Shell(branch.shell.line, stdin, env, cwd),
                        branch.loc.span(branch.shell.key))
            branches.append((branch.id, body))
        pc = em.emit(Op.PARALLEL, S, 0, span=kind.loc.span())
        self.branches.append((pc, (kind.wait, _given(kind.timeout_ms)), branches, f"{label}/",
                              em.file))

    def emit_branches(self) -> None:
        em = self.em
        for pc, (wait, timeout_ms), branches, prefix, file in self.branches:
            em.file = file
            regions = []
            for branch_id, body in branches:
                regions.append(Branch(branch_id, len(em.code)))
                S = em.const(branch_id)
                if body[0] == "pipeline":
                    _, pipeline, load = body
                    span = pipeline.span
                    self.emit_pipeline(pipeline, load, S, prefix + branch_id, branch_id)
                else:
                    _, shell, span = body
                    em.emit(Op.SHELL, S, em.const(shell), span=span)
                em.emit(Op.END_BRANCH, S, span=span)
            ins = em.code[pc]
            em.code[pc] = type(ins)(ins.op, ins.a, em.const(Parallel(wait, timeout_ms, regions)))
        em.file = 0

