"""Tool requests -> envelopes: run and resume, as the gateway embeds them and the CLI prints.

`handle(request, options)` is the embedding API; `run` and `resume` take keyword arguments. A
run that needs compiling asks the compiler frontend; nothing else here parses, resume never.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import define, evolve, field, frozen

from vm import codec, js, machine, token as tokens
from vm.codec import LoadError
from vm.commands import Context
from vm.frame import Frame
from vm.frontend import WORKFLOW_EXTENSIONS
from vm.process import Scope
from vm.program import Program
from vm.store import StateStore, StoreError, open_store
from vm.store.base import approval_id_form

if TYPE_CHECKING:
    from vm.frontend import Frontend

PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT_MS = 20000
DEFAULT_MAX_STDOUT_BYTES = 512000


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
@frozen
class Options:
    """Where and how requests run, set once by the CLI or an embedding gateway and shared by
    every request: a request never changes them (its own values make a `Settings`).
    `timeout_ms` and `max_stdout_bytes` bound `run` and `resume`; for a tool request they
    are the defaults under its `timeoutMs` / `maxStdoutBytes`, before the protocol's own."""

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
    # receives a compile error, or a runtime trap (vm.outcome.Failed), before it is flattened
    report: Callable[[Any], None] | None = None
    frontend: Frontend | None = None  # the compiler; None: the installed one, found on first use
    checkpoint_ttl_ms: int | None = None  # a halt's checkpoint expires after this; None:
    # LOBSTER_CHECKPOINT_TTL, else never

    def store(self) -> StateStore:
        """The store at `state_dir` (a directory, or a `postgresql://` URL), else the one
        LOBSTER_STORE or LOBSTER_STATE_DIR names, else ~/.lobster/state."""
        return open_store(self.state_dir, self.env)

    def context(self, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Context:
        """The context of a run under these options alone, in its own scope."""
        ctx = evolve(Settings.of(self), cwd=cwd or self.cwd).context(self, Scope())
        return ctx if env is None else evolve(ctx, env=env)


@frozen
class Settings:
    """One run's own values, derived from the Options and the request (or the parked frame)."""

    cwd: str
    mode: str
    timeout_ms: int | None = None
    max_stdout_bytes: int | None = None  # caps each child's output and the envelope

    @classmethod
    def of(cls, options: Options) -> Settings:
        return cls(options.cwd, options.mode, options.timeout_ms, options.max_stdout_bytes)

    @classmethod
    def of_request(cls, request: dict, options: Options) -> Settings:
        """A tool request's bounds: its own (floored), else the options', else the defaults."""
        timeout_ms = _positive(request, "timeoutMs", options.timeout_ms or DEFAULT_TIMEOUT_MS,
                               floor=200)
        max_stdout_bytes = _positive(request, "maxStdoutBytes",
                                     options.max_stdout_bytes or DEFAULT_MAX_STDOUT_BYTES,
                                     floor=1024)
        return cls(options.cwd, options.mode, timeout_ms, max_stdout_bytes)

    def output_cap(self, env: Mapping[str, str]) -> int | None:
        caps = [c for c in (self.max_stdout_bytes, _env_int(env, "LOBSTER_MAX_OUTPUT_BYTES"))
                if c is not None]
        return min(caps) if caps else None

    def context(self, options: Options, scope: Scope) -> Context:
        """The context the run's commands see; its deadline starts now."""
        deadline = None if self.timeout_ms is None else time.monotonic() + self.timeout_ms / 1000
        return Context(env=options.env, cwd=self.cwd, store=options.store(),
                       mode=self.mode, deadline=deadline,
                       max_output_bytes=self.output_cap(options.env),
                       stdin_is_tty=options.stdin_is_tty, scope=scope)


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


# the embedding API --------------------------------------------------------------------------
_BOUNDS = {
    "timeoutMs": ({"type": "number", "exclusiveMinimum": 0},
                  f"wall-clock limit of this call in ms (default {DEFAULT_TIMEOUT_MS}, at least 200)"),
    "maxStdoutBytes": ({"type": "number", "exclusiveMinimum": 0},
                       f"cap on the envelope and on each child's output in bytes (default "
                       f"{DEFAULT_MAX_STDOUT_BYTES}, at least 1024)"),
}
# A tool request's fields per action: name -> (JSON Schema of the value, what it is). `handle`
# reads these and no others (a test holds it to that); `lobster mcp` publishes them as schemas.
REQUEST_FIELDS: dict[str, dict[str, tuple[dict, str]]] = {
    "run": {
        "pipeline": ({"type": "string", "minLength": 1},
                     "inline pipeline text, or a workflow file path (.lobster/.yaml/.yml/.json)"),
        "argsJson": ({"type": "string"}, "a JSON object of args for a workflow file, as text"),
        "cwd": ({"type": "string"}, "working directory, relative to the server's and inside it"),
        **_BOUNDS},
    "resume": {
        "token": ({"type": "string", "minLength": 1}, "the resumeToken of a halted run"),
        "approvalId": ({"type": "string", "minLength": 1}, "the approvalId, instead of a token"),
        "approve": ({"type": "boolean"}, "the decision on an approval request"),
        "responseJson": ({"type": "string"}, "the answer to an input request, as JSON text"),
        "cancel": ({"const": True}, "true: cancel the halted run"),
        **_BOUNDS},
}
REQUIRED_FIELDS = {"run": ("pipeline",), "resume": ()}  # resume: token or approvalId, and
# exactly one of approve, responseJson, cancel (checked by `handle`)


def handle(request: Any, options: Options | None = None, *, scope: Scope | None = None) -> dict:
    """One tool call: `{"action": "run" | "resume", ...}` -> envelope. The run's children live
    in `scope` (a fresh one unless given), so the caller can cancel this run alone."""
    options = options or Options()
    scope = scope or Scope()
    try:
        if not isinstance(request, dict):
            raise RequestError("request must be a JSON object")
        action = request.get("action")
        if action == "run":
            return _run_request(request, options, scope)
        if action == "resume":
            return _resume_request(request, options, scope)
        raise RequestError("action must be run or resume")
    except RequestError as exc:
        return exc.envelope


def _run_request(request: dict, options: Options, scope: Scope) -> dict:
    pipeline = request.get("pipeline")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise RequestError("pipeline required")
    settings = Settings.of_request(request, options)
    if request.get("cwd") is not None:
        settings = evolve(settings, cwd=contained_cwd(request["cwd"], options.cwd))
    args_json = request.get("argsJson")
    return _run(pipeline, options, settings, scope,
                args_json=args_json if isinstance(args_json, str) else None)


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


def _resume_request(request: dict, options: Options, scope: Scope) -> dict:
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
    settings = Settings.of_request(request, options)
    if isinstance(approval_id, str) and approval_id:
        return _resume(options, settings, scope, decision, approval_id=approval_id)
    return _resume(options, settings, scope, decision, token=token)


# run ----------------------------------------------------------------------------------------
def is_workflow_path(pipeline: str, cwd: str) -> bool:
    text = pipeline.strip()
    if "|" in text or not text.lower().endswith(WORKFLOW_EXTENSIONS):
        return False
    return os.path.isfile(os.path.join(cwd, text))  # else a pipeline, as the reference runs it


def compiler(given: Frontend | None) -> Frontend:
    """The compiler: the one `given` (by the CLI or an embedder), else the installed one."""
    if given is not None:
        return given
    from vm.frontend import FrontendMissing, find_frontend

    try:
        return find_frontend()
    except FrontendMissing as exc:
        raise RequestError(str(exc), "E003", kind="runtime_error") from None


def compile_source(pipeline: str, options: Options, cwd: str, workflow: bool = False) -> Program:
    """The program for inline pipeline text, or for a workflow file under `cwd`."""
    frontend = compiler(options.frontend)
    try:
        if workflow:
            return frontend.compile_workflow(os.path.join(cwd, pipeline.strip()), options.store())
        return frontend.compile_pipeline(pipeline, options.store())
    except frontend.CompileError as exc:
        if options.report is not None:
            options.report(exc)
        raise RequestError(**frontend.error_fields(exc)) from None


def parse_args_json(args_json: str | None, command: str = "run") -> dict:
    """`COMMAND --args-json`: a JSON object, with the reference's two error texts."""
    if args_json is None:
        return {}
    try:
        return js.parse_args_json(args_json, command)
    except ValueError as exc:
        raise RequestError(str(exc)) from None


def run(pipeline: str, options: Options, *, args_json: str | None = None,
        program: Program | None = None, file: bool = False, scope: Scope | None = None) -> dict:
    """Compile (unless given a program) and run to the end or the first halt, bounded by the
    options. `pipeline` is inline text, or a workflow file path (always one when `file` is
    set)."""
    return _run(pipeline, options, Settings.of(options), scope or Scope(), args_json=args_json,
                program=program, file=file)


def _run(pipeline: str, options: Options, settings: Settings, scope: Scope, *,
         args_json: str | None = None, program: Program | None = None, file: bool = False
         ) -> dict:
    try:
        checkpoint_ttl_ms(options)  # a bad TTL is refused before anything runs
        workflow = file or is_workflow_path(pipeline, settings.cwd)
        args = parse_args_json(args_json)  # checked always, used by workflow files only
        if not workflow:
            args = {}
        if program is None:
            program = compile_source(pipeline, options, settings.cwd, workflow=workflow)
        frame = machine.new_frame(program, cwd=settings.cwd, mode=settings.mode, args=args)
        frame.origin = "workflow" if workflow else "pipeline"
        return _drive(program, frame, options, settings, scope)
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)


def _drive(program: Program, frame: Frame, options: Options, settings: Settings,
           scope: Scope) -> dict:
    host = machine.Host(ctx=settings.context(options, scope), write=options.write,
                        ask_line=options.ask_line, log=options.log)
    if frame.origin == "workflow" and (host.ctx.env.get("LOBSTER_LLM_PRICING_JSON") or "").strip():
        from vm import cost  # a bad pricing table is reported as a workflow starts, as the original

        for warning in cost.pricing(host.ctx.env)[1]:
            host.log(warning + "\n")
    outcome = machine.run(program, frame, host)
    if isinstance(outcome, machine.Failed):
        if options.report is not None:
            options.report(outcome)
        location = None
        if outcome.span:
            location = {"file": outcome.file or program.header.source_name,
                        "line": outcome.span[0], "column": outcome.span[1]}
        return error_envelope("runtime_error", outcome.message, outcome.code, location)
    if isinstance(outcome, machine.Finished):
        envelope = ok_envelope("ok", outcome.output)
    else:
        envelope = _cap_subject(_park(program, outcome.frame, options), options.env, outcome.frame)
    cap = settings.max_stdout_bytes
    if cap is not None and len(js.json_pretty(envelope).encode("utf-8")) > cap:
        return error_envelope("runtime_error", "lobster runtime result exceeded maxStdoutBytes",
                              "T423")
    return envelope


SUBJECT_MAX_BYTES = 192_000
TOOL_ENVELOPE_MAX_BYTES = 512_000


def _cap_subject(envelope: dict, env: Mapping[str, str], frame: Frame) -> dict:
    """A workflow's input request must fit LOBSTER_MAX_TOOL_ENVELOPE_BYTES (default 512000,
    a value under 1024 means the default), its token counted as 220 bytes, as the reference:
    a subject over 192000 bytes of JSON becomes a 2000-character preview; if that does not fit
    either, only its size is given; if even that does not fit, the run fails."""
    request = envelope.get("requiresInput")
    if frame.origin != "workflow" or not request or "subject" not in request:
        return envelope
    raw = env.get("LOBSTER_MAX_TOOL_ENVELOPE_BYTES")
    cap = js.to_number(raw) if raw is not None else float("nan")
    cap = int(cap) if cap == cap and cap not in (float("inf"), float("-inf")) and cap >= 1024 \
        else TOOL_ENVELOPE_MAX_BYTES
    base = {k: v for k, v in request.items() if k not in ("subject", "resumeToken")}

    def fits(subject: Any) -> bool:
        probe = {"protocolVersion": 1, "ok": True, "status": "needs_input", "output": [],
                 "requiresApproval": None,
                 "requiresInput": {**base, "subject": subject, "resumeToken": "x" * 220}}
        return len(js.json_compact(probe).encode("utf-8")) <= cap

    subject = request["subject"]
    if fits(subject):
        return envelope
    text = js.json_compact(subject)
    size = len(text.encode("utf-8"))
    if size > SUBJECT_MAX_BYTES:
        subject = {"truncated": True, "bytes": size, "preview": text[:2000]}
    if not fits(subject):
        subject = {"truncated": True, "bytes": size,
                   "preview": "[subject omitted: envelope size limit]"}
        if not fits(subject):
            step = frame.pending.step if frame.pending is not None else ""
            return error_envelope("runtime_error", f"Workflow input step {step} needs_input "
                                  f"envelope exceeds {cap} bytes even after subject truncation",
                                  "T424")
    request["subject"] = subject
    return envelope


def _park(program: Program, frame: Frame, options: Options) -> dict:
    store = options.store()
    store.save_program(program.hash, lambda: codec.dump_program(program),
                       intact=lambda blob: codec.intact(blob, program.hash))
    pending = frame.pending
    state_key = f"{frame.origin}_resume_{secrets.token_hex(16)}"
    kind = "pipeline-resume" if frame.origin == "pipeline" else "workflow-file"
    if pending.kind == "approval":
        # the id goes into the frame, so it is published before the frame is written
        pending.approval_id = store.new_approval_id(state_key)
    ttl = checkpoint_ttl_ms(options)
    store.save_frame(state_key, codec.dump_frame(frame),
                     expires_at=None if ttl is None else time.time() + ttl / 1000)
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
           approval_id: str | None = None, scope: Scope | None = None) -> dict:
    """Continue a parked run: check the token, load, check the decision, claim, step on. The
    resumed run is bounded by the options, as `run` is."""
    return _resume(options, Settings.of(options), scope or Scope(), decision, token=token,
                   approval_id=approval_id)


def _resume(options: Options, settings: Settings, scope: Scope, decision: Decision, *,
            token: str | None = None, approval_id: str | None = None,
            state_key: str | None = None) -> dict:
    try:
        store = options.store()
        if approval_id:
            state_key = store.lookup_approval_id(approval_id)
            if state_key is None:
                raise RequestError(f'Approval ID "{approval_id}" not found or expired', "E503")
            origin = state_key.split("_", 1)[0]
        elif state_key:
            origin = state_key.split("_", 1)[0]
        else:
            parsed = _checked_token(token, store)
            state_key, origin = parsed.state_key, parsed.origin
        not_found = ("Resume state not found" if decision.cancel
                     else f"{origin.capitalize()} resume state not found")
        parked = store.read_parked(state_key)
        if parked is None:
            return _unparked(store, state_key, decision, not_found, approval_id)
        if not decision.cancel:
            _refuse_expired(parked.expires_at)
            checkpoint_ttl_ms(options)  # a bad TTL is refused before anything runs
        frame, program = _load(store, parked.blob)
        pending = frame.pending
        approved_by = None
        if not decision.cancel:
            approved_by = _check_decision(frame, decision, options.env)
        ends = decision.cancel or decision.approve is False
        if not store.claim_frame(state_key, None if ends else _claimant(pending)):
            raise RequestError(not_found, "T430", kind="runtime_error")
        if ends:
            store.remove_approval_id(pending.approval_id)
            return ok_envelope("cancelled", [])
        try:
            machine.apply_decision(frame, decision.response, approved_by)
            envelope = _drive(program, frame, options,
                              evolve(settings, cwd=frame.cwd, mode=frame.mode), scope)
        except (RequestError, StoreError):
            _finish_claim(store, state_key, pending.approval_id, options)
            raise
        _finish_claim(store, state_key, pending.approval_id, options)
        return envelope
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)


def cancel_state(options: Options, state_key: str) -> dict:
    """Cancel the checkpoint parked under `state_key` (as `lobster pending` lists it), or clear
    its claim record when its resume did not finish: a resume with `cancel: true`."""
    return _resume(options, Settings.of(options), Scope(), Decision(cancel=True),
                   state_key=state_key)


def _claimant(pending):
    """Who claims a frame: this process, and the halt it resumes (approval id or step)."""
    from vm.store.claims import Claimant

    return Claimant(pending.kind, pending.approval_id or pending.step or "")


def _finish_claim(store: StateStore, state_key: str, approval_id: str | None,
                  options: Options) -> None:
    """The resumed run reached its next checkpoint or its end: its claim record goes, and then
    the approval id that led to it (kept until now, so a retry finds the record)."""
    try:
        store.remove_approval_id(approval_id)
        store.finish_claim(state_key)
    except StoreError as exc:  # the run's envelope matters more; the record reads as in doubt
        options.log(f"lobster: could not clear the claim of {state_key}: {exc}\n")


def _unparked(store: StateStore, state_key: str, decision: Decision, not_found: str,
              approval_id: str | None) -> dict:
    """No frame to resume: consumed (not found), being resumed right now by a live process on
    this host (not found, as for any concurrent resume), or claimed by a resume that did not
    finish (in doubt: refused with when and by whom; a cancel clears the record)."""
    record = store.claim_record(state_key)
    if record is None or claim_is_running(record):
        raise RequestError(not_found, "T430", kind="runtime_error")
    claimant = record.claimant
    if decision.cancel:
        for halt_id in (approval_id, claimant.halt_id if claimant else None):
            if halt_id and approval_id_form(halt_id) == halt_id:
                store.remove_approval_id(halt_id)
        store.finish_claim(state_key)
        return ok_envelope("cancelled", [])
    who = f"{claimant.pid}@{claimant.host}" if claimant else "a resume whose record was lost"
    raise RequestError(f"This checkpoint was claimed at {iso_time(record.claimed_at)} by {who} "
                       "and did not finish (its step may have run; `lobster pending` lists it, "
                       "a cancel clears it)", "T432", kind="runtime_error")


CLAIM_SETTLE_S = 60


def claim_is_running(record) -> bool:
    """The claim belongs to a process of this host that is still alive, or is being recorded
    right now (a claim whose record is not written yet, less than a minute old)."""
    claimant = record.claimant
    if claimant is None:
        return time.time() - record.claimed_at < CLAIM_SETTLE_S
    if claimant.pid <= 0 or claimant.host != _hostname():
        return False
    try:
        os.kill(claimant.pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, someone else's
        return True
    return True


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _refuse_expired(expires_at: float | None) -> None:
    if expires_at is not None and expires_at <= time.time():
        raise RequestError(f"This checkpoint expired at {iso_time(expires_at)}; it can only be "
                           "cancelled (or collected by `lobster gc`)", "T433",
                           kind="runtime_error")


def iso_time(seconds: float) -> str:
    """Unix seconds -> `2026-12-03T19:04:05Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def duration_ms(text: str) -> int | None:
    """`7d`, `12h`, `30m`, `45s`, `500ms`, `1w`, or several (`1h30m`) -> milliseconds; None when
    the text is not such a duration."""
    text = text.strip().lower()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _UNIT_MS[u] for n, u in parts)


def checkpoint_ttl_ms(options: Options) -> int | None:
    """How long a new checkpoint stays resumable: `Options.checkpoint_ttl_ms`, else
    LOBSTER_CHECKPOINT_TTL, else forever. A bad value is a RequestError (E004)."""
    ttl = options.checkpoint_ttl_ms
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
            raise RequestError(f"checkpoint_ttl_ms must be a positive number of milliseconds, "
                               f"got {ttl!r}", "E004", kind="runtime_error")
        return ttl
    raw = (options.env.get("LOBSTER_CHECKPOINT_TTL") or "").strip()
    if not raw:
        return None
    ttl = duration_ms(raw)
    if not ttl:
        raise RequestError(f"LOBSTER_CHECKPOINT_TTL must be a duration such as 7d, 12h or 30m, "
                           f"got {raw!r}", "E004", kind="runtime_error")
    return ttl


def store_error(exc: StoreError) -> dict:
    """The store could not be reached, read or written: nothing was claimed or consumed."""
    return error_envelope("runtime_error", str(exc), "T450")


def _checked_token(token: str | None, store: StateStore) -> tokens.Token:
    try:
        parsed = tokens.decode(token or "")
        tokens.verify(parsed, store.existing_key())
    except tokens.TokenError as exc:
        raise RequestError(exc.message, exc.code) from None
    return parsed


def _load(store: StateStore, blob: bytes) -> tuple[Frame, Program]:
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
                               "not response", "E510")
        if not decision.approve:
            return None
        return _check_approver(pending, env)
    if not decision.has_response:
        raise RequestError("Workflow resume requires --response-json for input requests"
                           if workflow else "pipeline input resumes require response", "E511")
    from vm.schema import first_error

    problem = first_error(pending.schema, decision.response)
    if problem is not None:
        where, message = problem
        what = f"Workflow input step {pending.step}" if pending.step else "pipeline input"
        raise RequestError(f"{what} response failed schema validation at {where}: {message}",
                           "E512")
    return None


def _check_approver(pending, env: Mapping[str, str]) -> str | None:
    approved_by = (env.get("LOBSTER_APPROVAL_APPROVED_BY") or "").strip() or None
    identity = pending.identity
    required, different = identity.get("requiredApprover"), identity.get("requireDifferentApprover")
    who = f"Workflow step {pending.step} approval"
    if (required or different) and not approved_by:
        raise RequestError(f"{who} requires approver identity; set LOBSTER_APPROVAL_APPROVED_BY",
                           "E513")
    if required and approved_by != required:
        raise RequestError(f"{who} requires approver '{required}', got '{approved_by}'", "E513")
    if different and approved_by == identity.get("initiatedBy"):
        raise RequestError(f"{who} must be granted by someone other than "
                           f"'{identity.get('initiatedBy')}'", "E513")
    return approved_by
