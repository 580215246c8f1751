"""Tool requests -> envelopes: run and resume, as the gateway embeds them and the CLI prints.

`handle(request)` is the embedding API: a tool-call dict in, an envelope dict out. `run` and
`resume` are the same with keyword arguments. Nothing here parses pipeline text unless a
run needs compiling (then lobsterc is imported on demand); resume never parses.
"""

from __future__ import annotations

import json
import os
import time
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from attrs import define, field

from vm import codec, js, machine, token as tokens
from vm.codec import LoadError
from vm.commands import Context
from vm.frame import Frame
from vm.program import Program
from vm.store import Store, default_state_dir

PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT_MS = 20000
DEFAULT_MAX_STDOUT_BYTES = 512000
WORKFLOW_EXTENSIONS = (".lobster", ".yaml", ".yml", ".json")


# envelopes ----------------------------------------------------------------------------------
def ok_envelope(status: str, output: list, approval: dict | None = None,
                input_request: dict | None = None) -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "ok": True, "status": status, "output": output,
            "requiresApproval": approval, "requiresInput": input_request}


def error_envelope(kind: str, message: str, code: str | None = None,
                   location: dict | None = None) -> dict:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code:
        error["code"] = code
    if location:
        error["location"] = location
    return {"protocolVersion": PROTOCOL_VERSION, "ok": False, "error": error}


def exit_code(envelope: dict) -> int:
    if envelope.get("ok"):
        return 0
    return 2 if envelope["error"]["type"] == "parse_error" else 1


class RequestError(Exception):
    """A bad request: becomes an error envelope (parse_error unless said otherwise)."""

    def __init__(self, message: str, code: str = "E001", kind: str = "parse_error",
                 location: dict | None = None) -> None:
        super().__init__(message)
        self.envelope = error_envelope(kind, message, code, location)


# the run environment ------------------------------------------------------------------------
@define
class Options:
    """Where and how a request runs. The CLI and an embedding gateway fill these in."""

    env: Mapping[str, str] = field(factory=lambda: os.environ)
    cwd: str = field(factory=os.getcwd)
    state_dir: str | None = None
    mode: str = "tool"
    timeout_ms: int | None = None
    max_stdout_bytes: int | None = None
    write: Callable[[str], None] = field(default=lambda text: None)
    ask_line: Callable[[str], str] | None = None
    log: Callable[[str], None] = field(default=lambda text: None)
    stdin_is_tty: bool = False
    report: Callable[[Any], None] | None = None  # receives a CompileError before it is flattened

    def store(self) -> Store:
        return Store(self.state_dir or default_state_dir(self.env))

    def output_cap(self) -> int | None:
        caps = [c for c in (self.max_stdout_bytes, _env_int(self.env, "LOBSTER_MAX_OUTPUT_BYTES"))
                if c is not None]
        return min(caps) if caps else None

    def context(self, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Context:
        deadline = None if self.timeout_ms is None else time.monotonic() + self.timeout_ms / 1000
        return Context(env=env if env is not None else self.env, cwd=cwd or self.cwd,
                       state_dir=str(self.store().root), mode=self.mode, deadline=deadline,
                       max_output_bytes=self.output_cap(), stdin_is_tty=self.stdin_is_tty)


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


# the embedding API --------------------------------------------------------------------------
def handle(request: Any, options: Options | None = None) -> dict:
    """One tool call: `{"action": "run" | "resume", ...}` -> envelope."""
    options = options or Options()
    try:
        if not isinstance(request, dict):
            raise RequestError("request must be a JSON object")
        action = request.get("action")
        if action == "run":
            return _run_request(request, options)
        if action == "resume":
            return _resume_request(request, options)
        raise RequestError("action must be run or resume")
    except RequestError as exc:
        return exc.envelope


def _run_request(request: dict, options: Options) -> dict:
    pipeline = request.get("pipeline")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise RequestError("pipeline required")
    options.timeout_ms = _positive(request, "timeoutMs", DEFAULT_TIMEOUT_MS, floor=200)
    options.max_stdout_bytes = _positive(request, "maxStdoutBytes", DEFAULT_MAX_STDOUT_BYTES,
                                         floor=1024)
    if request.get("cwd") is not None:
        options.cwd = contained_cwd(request["cwd"], options.cwd)
    args_json = request.get("argsJson")
    return run(pipeline, options, args_json=args_json if isinstance(args_json, str) else None,
               capped=True)


def _positive(request: dict, name: str, default: int, floor: int) -> int:
    value = request.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise RequestError(f"{name} must be a positive number")
    return max(int(value), floor)


def contained_cwd(cwd: Any, base: str) -> str:
    if not isinstance(cwd, str) or os.path.isabs(cwd):
        raise RequestError("cwd must be a relative path")
    root = os.path.realpath(base)
    target = os.path.realpath(os.path.join(root, cwd))
    if target != root and not target.startswith(root + os.sep):
        raise RequestError("cwd must stay within the gateway working directory")
    return target


def _resume_request(request: dict, options: Options) -> dict:
    token = request.get("token")
    approval_id = request.get("approvalId")
    if not (isinstance(token, str) and token) and not (isinstance(approval_id, str) and approval_id):
        raise RequestError("token or approvalId required")
    given = [k for k in ("approve", "responseJson", "cancel") if request.get(k) is not None]
    if len(given) != 1:
        raise RequestError("resume requires exactly one of approve, responseJson, or cancel: true")
    if "cancel" in given and request["cancel"] is not True:
        raise RequestError("cancel must be true")
    decision: Decision
    if "approve" in given:
        if not isinstance(request["approve"], bool):
            raise RequestError("approve must be a boolean")
        decision = Decision(approve=request["approve"])
    elif "responseJson" in given:
        try:
            decision = Decision(response=json.loads(request["responseJson"]), has_response=True)
        except (TypeError, ValueError):
            raise RequestError("responseJson must be valid JSON") from None
    else:
        decision = Decision(cancel=True)
    if isinstance(approval_id, str) and approval_id:
        return resume(options, decision, approval_id=approval_id)
    return resume(options, decision, token=token)


# run ----------------------------------------------------------------------------------------
def is_workflow_path(pipeline: str, cwd: str) -> bool:
    text = pipeline.strip()
    if "|" in text or not text.lower().endswith(WORKFLOW_EXTENSIONS):
        return False
    path = os.path.join(cwd, text)
    return os.path.exists(path) or not any(ch.isspace() for ch in text)


def compile_source(pipeline: str, options: Options, workflow: bool = False) -> Program:
    """The program for inline pipeline text or a workflow file: from the compile cache, or
    compiled (lobsterc, and with it lark, is imported here and only here)."""
    from vm import cache

    store = options.store()
    if workflow:
        path = os.path.realpath(os.path.join(options.cwd, pipeline.strip()))
        cache_key = cache.key("workflow", path)
    else:
        cache_key = cache.key("pipeline", pipeline)
    program = cache.lookup(store, cache_key)
    if program is not None:
        return program
    from lobsterc.diagnostics import CompileError

    try:
        if workflow:
            from lobsterc.workflow import compile_workflow_files

            program, files = compile_workflow_files(os.path.join(options.cwd, pipeline.strip()))
            deps = {f: cache.file_sha(f) for f in files}
        else:
            from lobsterc.codegen import compile_pipeline

            program, deps = compile_pipeline(pipeline), {}
    except CompileError as exc:
        if options.report is not None:
            options.report(exc)
        raise RequestError(**compile_error_fields(exc)) from None
    cache.remember(store, cache_key, program, deps)
    return program


def compile_error_fields(exc) -> dict:
    diag = exc.first
    location = None
    if diag.span is not None:
        location = {"file": diag.span.source, "line": diag.span.line, "column": diag.span.col}
    return {"message": diag.message, "code": diag.code, "kind": diag.kind, "location": location}


def parse_args_json(args_json: str | None) -> dict:
    if args_json is None:
        return {}
    try:
        value = js.json_loads(args_json)
    except ValueError:
        raise RequestError("run --args-json must be valid JSON") from None
    if not isinstance(value, dict):
        raise RequestError("run --args-json must be a JSON object")
    return value


def run(pipeline: str, options: Options, *, args_json: str | None = None,
        capped: bool = False, program: Program | None = None, file: bool = False) -> dict:
    """Compile (unless given a program) and run to the end or the first halt. `pipeline` is
    inline text, or a workflow file path (always one when `file` is set)."""
    try:
        workflow = file or is_workflow_path(pipeline, options.cwd)
        args = parse_args_json(args_json)  # checked always, used by workflow files only
        if not workflow:
            args = {}
        if program is None:
            program = compile_source(pipeline, options, workflow=workflow)
        ctx = options.context()
        frame = machine.new_frame(program, cwd=ctx.cwd, mode=options.mode, args=args)
        frame.origin = "workflow" if workflow else "pipeline"
        return _drive(program, frame, options, ctx, capped)
    except RequestError as exc:
        return exc.envelope


def _drive(program: Program, frame: Frame, options: Options, ctx: Context, capped: bool) -> dict:
    host = machine.Host(ctx=ctx, write=options.write, ask_line=options.ask_line,
                        log=options.log)
    outcome = machine.run(program, frame, host)
    if isinstance(outcome, machine.Failed):
        location = None
        if outcome.span:
            location = {"file": outcome.file or program.header.source_name,
                        "line": outcome.span[0], "column": outcome.span[1]}
        return error_envelope("runtime_error", outcome.message, outcome.code, location)
    if isinstance(outcome, machine.Finished):
        envelope = ok_envelope("ok", outcome.output)
    else:
        envelope = _park(program, outcome.frame, options)
    cap = options.max_stdout_bytes if capped else None
    if cap is not None and len(js.json_pretty(envelope).encode("utf-8")) > cap:
        return error_envelope("runtime_error", "lobster runtime result exceeded maxStdoutBytes",
                              "T423")
    return envelope


def _park(program: Program, frame: Frame, options: Options) -> dict:
    store = options.store()
    store.save_program(program.hash, lambda: codec.dump_program(program))
    pending = frame.pending
    state_key = f"{frame.origin}_resume_{secrets.token_hex(16)}"
    kind = "pipeline-resume" if frame.origin == "pipeline" else "workflow-file"
    if pending.kind == "approval":
        # the id goes into the frame, so it is published before the frame is written
        pending.approval_id = store.new_approval_id(state_key)
    store.save_frame(state_key, codec.dump_frame(frame))
    token = tokens.issue(kind, state_key, store.key())
    if pending.kind == "approval":
        request: dict[str, Any] = {"type": "approval_request", "prompt": pending.prompt,
                                   "items": pending.items}
        if pending.preview is not None:
            request["preview"] = pending.preview
        request.update(pending.identity)
        request["resumeToken"] = token
        if pending.approval_id:
            request["approvalId"] = pending.approval_id
        return ok_envelope("needs_approval", [], approval=request)
    request = {"type": "input_request", "prompt": pending.prompt, "responseSchema": pending.schema}
    if pending.has_defaults:
        request["defaults"] = pending.defaults
    if pending.has_subject:
        request["subject"] = pending.subject
    request["resumeToken"] = token
    return ok_envelope("needs_input", [], input_request=request)


# resume -------------------------------------------------------------------------------------
@define
class Decision:
    approve: bool | None = None
    response: Any = None
    has_response: bool = False
    cancel: bool = False


def resume(options: Options, decision: Decision, *, token: str | None = None,
           approval_id: str | None = None) -> dict:
    """Continue a parked run: check the token, load, check the decision, claim, step on."""
    store = options.store()
    try:
        if approval_id:
            state_key = store.lookup_approval_id(approval_id)
            if state_key is None:
                raise RequestError(f'Approval ID "{approval_id}" not found or expired', "E303")
            origin = state_key.split("_", 1)[0]
        else:
            parsed = _checked_token(token, store)
            state_key, origin = parsed.state_key, parsed.origin
        not_found = ("Resume state not found" if decision.cancel
                     else f"{origin.capitalize()} resume state not found")
        blob = store.read_frame(state_key)
        if blob is None:
            raise RequestError(not_found, "T430", kind="runtime_error")
        frame, program = _load(store, blob)
        approved_by = None
        if not decision.cancel:
            approved_by = _check_decision(frame, decision, options.env)
        if not store.claim_frame(state_key):
            raise RequestError(not_found, "T430", kind="runtime_error")
        store.remove_approval_id(frame.pending.approval_id if frame.pending else None)
        if decision.cancel or decision.approve is False:
            return ok_envelope("cancelled", [])
        machine.apply_decision(frame, decision.response, approved_by)
        options.mode = frame.mode
        ctx = options.context(cwd=frame.cwd)
        return _drive(program, frame, options, ctx, capped=options.max_stdout_bytes is not None)
    except RequestError as exc:
        return exc.envelope


def _checked_token(token: str | None, store: Store) -> tokens.Token:
    try:
        parsed = tokens.decode(token or "")
        tokens.verify(parsed, store.existing_key())
    except tokens.TokenError as exc:
        raise RequestError(exc.message, exc.code) from None
    return parsed


def _load(store: Store, blob: bytes) -> tuple[Frame, Program]:
    try:
        frame = codec.load_frame(blob)
        program_blob = store.load_program_bytes(frame.program_hash)
        if program_blob is None:
            raise LoadError(f"program {frame.program_hash} is missing from the state directory")
        program = codec.load_program(program_blob)
    except LoadError as exc:
        raise RequestError(f"Resume state is corrupt: {exc}", "T431", kind="runtime_error") from None
    if program.hash != frame.program_hash or frame.pending is None:
        raise RequestError("Resume state is corrupt: frame does not match its program", "T431",
                           kind="runtime_error")
    try:
        codec.check_frame(frame, program)
    except LoadError as exc:
        raise RequestError(f"Resume state is corrupt: {exc}", "T431", kind="runtime_error") from None
    return frame, program


def _check_decision(frame: Frame, decision: Decision, env: Mapping[str, str]) -> str | None:
    """An invalid decision is a parse_error and leaves the checkpoint untouched. Returns the
    approver's identity for an approval that needs one."""
    pending = frame.pending
    workflow = frame.origin == "workflow"
    if pending.kind == "approval":
        if decision.approve is None:
            raise RequestError("Workflow resume requires --approve yes|no for approval requests"
                               if workflow else "approval resumes require approved=true|false, "
                               "not response", "E310")
        if not decision.approve:
            return None
        return _check_approver(pending, env)
    if not decision.has_response:
        raise RequestError("Workflow resume requires --response-json for input requests"
                           if workflow else "pipeline input resumes require response", "E311")
    from vm.schema import first_error

    problem = first_error(pending.schema, decision.response)
    if problem is not None:
        where, message = problem
        what = f"Workflow input step {pending.step}" if pending.step else "pipeline input"
        raise RequestError(f"{what} response failed schema validation at {where}: {message}",
                           "E312")
    return None


def _check_approver(pending, env: Mapping[str, str]) -> str | None:
    approved_by = (env.get("LOBSTER_APPROVAL_APPROVED_BY") or "").strip() or None
    identity = pending.identity
    required, different = identity.get("requiredApprover"), identity.get("requireDifferentApprover")
    who = f"Workflow step {pending.step} approval"
    if (required or different) and not approved_by:
        raise RequestError(f"{who} requires approver identity; set LOBSTER_APPROVAL_APPROVED_BY",
                           "E313")
    if required and approved_by != required:
        raise RequestError(f"{who} requires approver '{required}', got '{approved_by}'", "E313")
    if different and approved_by == identity.get("initiatedBy"):
        raise RequestError(f"{who} must be granted by someone other than "
                           f"'{identity.get('initiatedBy')}'", "E313")
    return approved_by
