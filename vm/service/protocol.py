"""Tool requests -> envelopes: run and resume, as the gateway embeds them and the CLI prints.

`handle(request, options)` is the embedding API; `run` and `resume` take keyword arguments. A
run that needs compiling asks the compiler frontend; nothing else here parses, resume never.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from attrs import define, evolve, field, frozen

from vm.core import bounds, js
from vm.core.source import file_name, located
from vm.isa import codec
from vm.engine import machine
from vm.host import token as tokens
from vm.isa.codec import LoadError
from vm.host.commands import Context
from vm.isa.frame import Frame, StepApprovalWait, StepInputWait
from vm.isa.ops import ApproverRules
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.host.children import Scope
from vm.isa.program import Program
from vm.host.store import StateStore, StoreError, lifecycle, open_store
from vm.host.store.base import SigningKeyError, approval_id_form

if TYPE_CHECKING:
    from vm.engine.events import Event
    from vm.service.frontend import Frontend
    from vm.service.messages import Envelope, Request

PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT_MS = 20000
DEFAULT_MAX_STDOUT_BYTES = 512000
# Limits on what a request may ask for (README "Limits"): each refuses with its own code.
MAX_TIMEOUT_MS = bounds.TIMEOUT_MS.maximum  # (E001; every bound: vm/core/bounds.py)
MAX_STDOUT_BYTES_LIMIT = bounds.MAX_STDOUT_BYTES.maximum  # (E001)
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # one tool request's JSON text (E006)
MAX_PIPELINE_BYTES = 64 * 1024  # inline pipeline text, in UTF-8 bytes (E105)


# envelopes ----------------------------------------------------------------------------------
def ok_envelope(status: str, output: list, approval: dict | None = None,
                input_request: dict | None = None) -> dict:
    """An `ok: true` envelope (`vm.service.messages.OkEnvelope`)."""
    return {"protocolVersion": PROTOCOL_VERSION, "ok": True, "status": status, "output": output,
            "requiresApproval": approval, "requiresInput": input_request}


def error_envelope(kind: str, message: str, code: str | None = None,
                   location: dict | None = None) -> dict:
    """An `ok: false` envelope (`vm.service.messages.ErrorEnvelope`); `code` is one of vm.core.codes."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if code:
        error["code"] = code
    if location:
        error["location"] = location
    return {"protocolVersion": PROTOCOL_VERSION, "ok": False, "error": error}


def exit_code(envelope: dict) -> int:
    """The CLI's exit status for an envelope: 0 ok (any status), 1 runtime error, 2 parse error."""
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

    Fields (all optional):

    - `env`: the environment runs see and Lobster's own variables are read from (README,
      "Environment variables"); default `os.environ`.
    - `cwd`: the base working directory; a request's `cwd` is relative to it and must stay
      inside it. Default: the process's working directory.
    - `state_dir`: where checkpoints live: a directory, or a `postgresql://` URL. Default:
      `LOBSTER_STORE`, else `LOBSTER_STATE_DIR`, else `~/.lobster/state`.
    - `mode`: `"tool"` (envelopes; never prompts) or `"human"` (the CLI's interactive mode).
    - `timeout_ms`, `max_stdout_bytes`: bounds of `run` and `resume`; for a tool request,
      the defaults under its `timeoutMs` / `maxStdoutBytes`, before the protocol's own
      (20000 ms, 512000 bytes).
    - `write`: receives what renderers (`table`, `json`) print in human mode.
    - `ask_line`: asks a question on a terminal (human mode); None: never ask.
    - `log`: receives diagnostic lines (`[RETRY]`, cost warnings).
    - `stdin_is_tty`: whether the caller's stdin is a terminal (human-mode prompts).
    - `report`: receives a compile error, or a runtime trap (`vm.engine.outcome.Failed`), before it
      is flattened into an envelope (the CLI prints excerpts from it); and the halt
      (`vm.isa.frame.Pending`) of a parked run (the CLI renders a human-mode halt from it).
    - `frontend`: the compiler (`vm.service.frontend.Frontend`); None: the installed one, found
      through the `lobster.frontend` entry point on first use.
    - `checkpoint_ttl_ms`: a new checkpoint expires this many ms after its halt; None:
      `LOBSTER_CHECKPOINT_TTL`, else never.
    - `on_event`: hears every run's events (`vm.engine.events.Event`: step started, finished,
      retried, skipped, halted, failed, child stderr lines) on a thread of its own; events
      never change the envelope, except that one with events dropped for a callback too far
      behind says how many in `eventsDropped` (vm.engine.events). For one request:
      `handle(request, evolve(options, on_event=cb))`.
    """

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
    report: Callable[[Any], None] | None = None
    frontend: Frontend | None = None
    checkpoint_ttl_ms: int | None = None
    on_event: Callable[[Event], None] | None = None

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
    checkpoint_ttl_ms: int | None = None  # this call's own TTL, before the workflow's

    @classmethod
    def of(cls, options: Options) -> Settings:
        """The options' own bounds, each checked against vm/core/bounds.py (E010)."""
        return cls(options.cwd, options.mode, option_bound(options, "timeout_ms"),
                   option_bound(options, "max_stdout_bytes"))

    @classmethod
    def of_request(cls, request: dict, options: Options) -> Settings:
        """A tool request's bounds: its own (floored), else the options', else the defaults."""
        timeout_ms = _positive(request, "timeoutMs",
                               option_bound(options, "timeout_ms") or DEFAULT_TIMEOUT_MS,
                               floor=200)
        max_stdout_bytes = _positive(request, "maxStdoutBytes",
                                     option_bound(options, "max_stdout_bytes")
                                     or DEFAULT_MAX_STDOUT_BYTES, floor=1024)
        return cls(options.cwd, options.mode, timeout_ms, max_stdout_bytes,
                   request_ttl_ms(request.get("checkpointTtl"), "checkpointTtl"))

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


_OPTION_BOUNDS = {"timeout_ms": bounds.TIMEOUT_MS, "max_stdout_bytes": bounds.MAX_STDOUT_BYTES}


def option_bound(options: Options, name: str) -> int | None:
    """An `Options` field under its bound (None: not set), else a RequestError (E010)."""
    value = getattr(options, name)
    if value is None:
        return None
    try:
        return _OPTION_BOUNDS[name].parse(value, f"Options.{name}", text=False)
    except bounds.BoundError as exc:
        unit = _OPTION_BOUNDS[name].unit
        message = exc.message if exc.kind == "range" else \
            f"Options.{name} must be a positive number of {unit}, got {bounds.shown(value)}"
        raise RequestError(message, "E010", kind="runtime_error") from None


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not (raw.isascii() and raw.isdigit()):
        return None
    if len(raw) > 18:  # more than any machine could hold: no cap in practice
        return 10**18
    return int(raw) or None


# the embedding API --------------------------------------------------------------------------
_BOUNDS = {  # their limits: vm/core/bounds.py
    "timeoutMs": ({"type": "number", **bounds.schema(bounds.TIMEOUT_MS, text=False)},
                  f"wall-clock limit of this call in ms (default {DEFAULT_TIMEOUT_MS}, at least 200)"),
    "maxStdoutBytes": ({"type": "number", **bounds.schema(bounds.MAX_STDOUT_BYTES, text=False)},
                       f"cap on the envelope and on each child's output in bytes (default "
                       f"{DEFAULT_MAX_STDOUT_BYTES}, at least 1024)"),
    "checkpointTtl": ({"type": ["string", "integer"], **bounds.schema(bounds.CHECKPOINT_TTL)},
                      "how long a checkpoint this call parks stays resumable: a duration (30m, "
                      "12h, 7d) or ms; before the workflow's checkpoint_ttl and "
                      "LOBSTER_CHECKPOINT_TTL"),
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


def handle(request: Request | Mapping[str, Any], options: Options | None = None, *,
           scope: Scope | None = None) -> Envelope:
    """One tool call: a `vm.service.messages.Request` (`{"action": "run" | "resume", ...}`, a plain
    dict) -> its `vm.service.messages.Envelope`. The run's children live in `scope` (a fresh one
    unless given), so the caller can cancel this run alone. Never raises: whatever goes wrong
    becomes an error envelope (a bad request its own code, a bug T498), and nothing is
    consumed by a refusal."""
    return cast("Envelope", _handle(request, options, scope))


def _handle(request: Any, options: Options | None, scope: Scope | None) -> dict:
    options = options or Options()
    scope = scope or Scope()
    try:
        if not isinstance(request, dict):
            raise RequestError("request must be a JSON object")
        action = request.get("action")
        if action not in REQUEST_FIELDS:
            raise RequestError("action must be run or resume")
        _refuse_unknown_fields(request, action)
        check_unicode(request, "the request")
        if action == "run":
            return _run_request(request, options, scope)
        return _resume_request(request, options, scope)
    except RequestError as exc:
        return exc.envelope
    except Exception as exc:  # noqa: BLE001 - the last resort: no request ends in a traceback
        return internal_error(exc)


def internal_error(exc: BaseException) -> dict:
    """The envelope of an exception nothing else caught: a bug of ours. It is raised before a
    checkpoint is claimed or after its claim is recorded, so nothing is silently consumed (a
    claimed checkpoint reads as in doubt, T432)."""
    if isinstance(exc, RecursionError):
        what = "input nested too deeply"
    elif isinstance(exc, MemoryError):
        what = "out of memory"
    else:
        what = f"{type(exc).__name__}: {exc}"
    message = f"internal error ({what[:500]}); this is a bug in Lobster, please report it"
    return error_envelope("runtime_error", message, "T498")


def _refuse_unknown_fields(request: dict, action: str) -> None:
    """A field the action does not take is refused by name (a typo is not silently ignored)."""
    known = REQUEST_FIELDS[action]
    for name in request:
        if name == "action" or name in known:
            continue
        shown = name if isinstance(name, str) and len(name) <= 64 else f"{str(name)[:64]}..."
        other = next((a for a, fields in REQUEST_FIELDS.items() if name in fields), None)
        if other is not None:
            hint = f" (it belongs to a {other} request)"
        else:
            import difflib

            close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise RequestError(f"unknown field {shown!r} in a {action} request{hint}; "
                           f"{action} takes: {', '.join(known)}", "E008")


def check_unicode(value: Any, what: str) -> None:
    """Refuse a string holding a lone UTF-16 surrogate (JSON's `\\ud83d` alone): it is not
    Unicode text, and could be neither run nor stored."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(f"{what} holds a lone UTF-16 surrogate, which is not Unicode text",
                           "E009") from None
    except RecursionError:
        raise RequestError(f"{what} is nested deeper than {js.MAX_JSON_DEPTH} levels",
                           "E007") from None


def _run_request(request: dict, options: Options, scope: Scope) -> dict:
    pipeline = request.get("pipeline")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise RequestError("pipeline required")
    settings = Settings.of_request(request, options)
    if request.get("cwd") is not None:
        settings = evolve(settings, cwd=contained_cwd(request["cwd"], options.cwd))
    args_json = request.get("argsJson")
    if args_json is not None and not isinstance(args_json, str):
        raise RequestError("argsJson must be a string: the args object as JSON text")
    if is_workflow_path(pipeline, settings.cwd):
        return _run(pipeline, options, settings, scope, args_json=args_json, file=True,
                    program=_contained_workflow(pipeline.strip(), options, settings))
    return _run(pipeline, options, settings, scope, args_json=args_json)


def _contained_workflow(path: str, options: Options, settings: Settings) -> Program:
    """A request's workflow file and every file it calls, each held to the rule of a request
    `cwd` (contained_cwd): inside the gateway working directory, symbolic links resolved (an
    absolute path is taken when it names a file in there)."""
    def contain(name: str) -> None:
        try:
            contained_cwd(os.path.relpath(os.path.join(settings.cwd, name), options.cwd),
                          options.cwd)
        except RequestError:
            raise RequestError(f"workflow file {name!r} must stay within the gateway working "
                               "directory") from None

    contain(path)
    program = compile_source(path, options, settings.cwd, workflow=True)
    main_dir = os.path.dirname(file_name(os.path.join(settings.cwd, path)))
    for name in program.files[1:]:  # named from the main file's real directory
        contain(located(main_dir, name))
    return program


def _positive(request: dict, name: str, default: int, floor: int) -> int:
    """A request's numeric bound (`timeoutMs`, `maxStdoutBytes`; vm/core/bounds.py), raised to
    `floor`; `default` when absent."""
    value = request.get(name)
    if value is None:
        return default
    try:
        number = bounds.BOUNDS[name].parse(value, name, text=False)
    except bounds.BoundError as exc:
        raise RequestError(f"{name} must be a positive number" if exc.kind == "form"
                           else exc.message) from None
    return max(number, floor)


def contained_cwd(cwd: Any, base: str) -> str:
    if not isinstance(cwd, str) or os.path.isabs(cwd):
        raise RequestError("cwd must be a relative path")
    if "\0" in cwd:
        raise RequestError("cwd must not contain a NUL byte")
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
        decision = Decision(response=parse_response_json(request["responseJson"],
                                                         "responseJson"), has_response=True)
    else:
        decision = Decision(cancel=True)
    settings = Settings.of_request(request, options)
    if isinstance(approval_id, str) and approval_id:
        return _resume(options, settings, scope, decision, approval_id=approval_id)
    return _resume(options, settings, scope, decision, token=token)


def parse_response_json(text: Any, name: str) -> Any:
    """The answer to an input request, given as JSON text (`responseJson`, `--response-json`)."""
    if not isinstance(text, str):
        raise RequestError(f"{name} must be valid JSON")
    try:
        value = js.json_loads(text)
    except js.JSONTooDeep:
        raise RequestError(f"{name} is nested deeper than {js.MAX_JSON_DEPTH} levels",
                           "E007") from None
    except ValueError:
        raise RequestError(f"{name} must be valid JSON") from None
    check_unicode(value, name)
    return value


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
    from vm.service.frontend import FrontendMissing, find_frontend

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
        args = js.parse_args_json(args_json, command)
    except js.JSONTooDeep as exc:
        raise RequestError(str(exc), "E007") from None
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    check_unicode(args, f"{command} --args-json")
    return args


def run(pipeline: str, options: Options, *, args_json: str | None = None,
        program: Program | None = None, file: bool = False, scope: Scope | None = None,
        checkpoint_ttl: str | int | None = None) -> dict:
    """Compile (unless given a program) and run to the end or the first halt, bounded by the
    options. `pipeline` is inline text, or a workflow file path (always one when `file` is
    set). `checkpoint_ttl` (a duration such as "30m", or ms) is how long a checkpoint of this
    call stays resumable, before the workflow's own and the options' default."""
    try:
        settings = evolve(Settings.of(options),
                          checkpoint_ttl_ms=request_ttl_ms(checkpoint_ttl, "checkpoint_ttl"))
        return _run(pipeline, options, settings, scope or Scope(), args_json=args_json,
                    program=program, file=file)
    except RequestError as exc:
        return exc.envelope
    except Exception as exc:  # noqa: BLE001 - the last resort, as in `handle`
        return internal_error(exc)


def _run(pipeline: str, options: Options, settings: Settings, scope: Scope, *,
         args_json: str | None = None, program: Program | None = None, file: bool = False
         ) -> dict:
    try:
        checkpoint_ttl_ms(options)  # a bad TTL is refused before anything runs
        workflow = file or is_workflow_path(pipeline, settings.cwd)
        if not workflow:
            check_pipeline_text(pipeline)
        args = parse_args_json(args_json)  # checked always, used by workflow files only
        if not workflow:
            args = {}
        if program is None:
            program = compile_source(pipeline, options, settings.cwd, workflow=workflow)
        if program.halts:  # it may park: its key is checked before anything runs
            signing_key(options.store())
        frame = machine.new_frame(program, cwd=settings.cwd, mode=settings.mode, args=args,
                                  source=os.path.join(settings.cwd, pipeline.strip())
                                  if workflow else None)
        frame.origin = "workflow" if workflow else "pipeline"
        return _drive(program, frame, options, settings, scope)
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)


def check_pipeline_text(pipeline: str) -> None:
    """Inline pipeline text: at most MAX_PIPELINE_BYTES, Unicode, no NUL byte."""
    try:
        size = len(pipeline.encode("utf-8"))
    except UnicodeEncodeError:
        raise RequestError("pipeline holds a lone UTF-16 surrogate, which is not Unicode text",
                           "E009") from None
    if size > MAX_PIPELINE_BYTES:
        raise RequestError(f"pipeline text is {size} bytes, over the limit of "
                           f"{MAX_PIPELINE_BYTES}", "E105")


def _drive(program: Program, frame: Frame, options: Options, settings: Settings,
           scope: Scope) -> dict:
    if options.on_event is None:
        return _drive_with(program, frame, options, settings, scope, None)
    from vm.engine.events import Emitter

    events = Emitter(options.on_event, options.log)
    try:
        envelope = _drive_with(program, frame, options, settings,
                               Scope(scope, listener=events), events)
    finally:
        dropped = events.close()
    if dropped:  # additive: the events this run could not hand to the callback
        envelope = {**envelope, "eventsDropped": dropped}
    return envelope


def _drive_with(program: Program, frame: Frame, options: Options, settings: Settings,
                scope: Scope, events) -> dict:
    host = machine.Host(ctx=settings.context(options, scope), write=options.write,
                        ask_line=options.ask_line, log=options.log, events=events)
    if frame.origin == "workflow" and host.ctx.env.get("LOBSTER_LLM_PRICING_JSON"):
        from vm.isa import cost  # a bad pricing table is reported as a workflow starts, as the original

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
        try:
            envelope = _park(program, outcome.frame, options, settings)
        except OSError as exc:  # the state dir is a file, read-only, full...
            raise StoreError(f"The state store at {options.store().location} cannot be "
                             f"written: {exc.strerror or exc}") from None
        if events is not None:
            pending = outcome.frame.pending
            events.halted(outcome.frame.pc - 1, pending.kind, pending.approval_id,
                          pending.prompt)
    _check_envelope_size(envelope, settings)
    return envelope


def _check_envelope_size(envelope: dict, settings: Settings) -> None:
    cap = settings.max_stdout_bytes
    if cap is not None and len(js.json_pretty(envelope).encode("utf-8")) > cap:
        raise RequestError("lobster runtime result exceeded maxStdoutBytes", "T423",
                           kind="runtime_error")


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
            raise RequestError(f"Workflow input step {step} needs_input envelope exceeds {cap} "
                               "bytes even after subject truncation", "T425", kind="runtime_error")
    request["subject"] = subject
    return envelope


def _park(program: Program, frame: Frame, options: Options, settings: Settings) -> dict:
    """Save the halted run and return its envelope. Every limit is checked first (the frame
    stores and loads again, the envelope fits maxStdoutBytes): a checkpoint is saved only when
    its token is handed out and resume or cancel can take it."""
    store = options.store()
    key = signing_key(store)  # the token and the frame's MAC: one key, read once
    pending = frame.pending
    state_key = tokens.new_state_key(frame.origin)
    kind = tokens.kind_for(frame.origin)
    ttl = settings.checkpoint_ttl_ms or program.checkpoint_ttl_ms or checkpoint_ttl_ms(options)
    if pending.kind == "approval":
        # the id goes into the frame, so it is published before the frame is written
        pending.approval_id = store.new_approval_id(state_key)
    try:
        try:
            blob = codec.dump_frame(frame)
        except codec.Unstorable as exc:
            raise RequestError(f"lobster runtime checkpoint cannot be stored: {exc}", "T424",
                               kind="runtime_error") from None
        envelope = _cap_subject(_halt_envelope(pending, tokens.issue(kind, state_key, key)),
                                options.env, frame)
        _check_envelope_size(envelope, settings)
    except RequestError:
        store.remove_approval_id(pending.approval_id)
        raise
    store.save_program(program.hash, lambda: codec.dump_program(program),
                       intact=lambda blob: codec.intact(blob, program.hash))
    store.save_frame(state_key, blob, expires_at=None if ttl is None else time.time() + ttl / 1000,
                     key=key)
    if options.report is not None:
        options.report(pending)  # the CLI renders a human-mode halt from it
    return envelope


def _halt_envelope(pending, token: str) -> dict:
    if pending.kind == "approval":
        request: dict[str, Any] = {"type": "approval_request", "prompt": pending.prompt,
                                   "items": pending.items}
        if pending.preview is not None:
            request["preview"] = pending.preview
        if isinstance(pending, StepApprovalWait):
            request.update(approver_fields(pending.approvers))
        request["resumeToken"] = token
        if pending.approval_id:
            request["approvalId"] = pending.approval_id
        return ok_envelope("needs_approval", [], approval=request)
    request = {"type": "input_request", "prompt": pending.prompt, "responseSchema": pending.schema}
    if isinstance(pending, StepInputWait):
        if pending.has_defaults:
            request["defaults"] = pending.defaults
        if pending.has_subject:
            request["subject"] = pending.subject
    elif pending.subject is not None:  # an `ask` stage's items, when it attaches them
        request["subject"] = pending.subject
    request["resumeToken"] = token
    return ok_envelope("needs_input", [], input_request=request)


# resume -------------------------------------------------------------------------------------
@define
class Decision:
    """The answer a resume brings: `approve` (an approval), `response` with `has_response`
    (an input; the response may be null), or `cancel`."""

    approve: bool | None = None
    response: Any = None
    has_response: bool = False
    cancel: bool = False


def resume(options: Options, decision: Decision, *, token: str | None = None,
           approval_id: str | None = None, scope: Scope | None = None,
           checkpoint_ttl: str | int | None = None) -> dict:
    """Continue a parked run: check the token, load, check the decision, claim, step on. The
    resumed run is bounded by the options, as `run` is; `checkpoint_ttl` is as for `run`, for
    the checkpoint the resumed run may reach next."""
    try:
        settings = evolve(Settings.of(options),
                          checkpoint_ttl_ms=request_ttl_ms(checkpoint_ttl, "checkpoint_ttl"))
        return _resume(options, settings, scope or Scope(), decision, token=token,
                       approval_id=approval_id)
    except RequestError as exc:
        return exc.envelope
    except Exception as exc:  # noqa: BLE001 - the last resort, as in `handle`
        return internal_error(exc)


def _resume(options: Options, settings: Settings, scope: Scope, decision: Decision, *,
            token: str | None = None, approval_id: str | None = None,
            state_key: str | None = None) -> dict:
    try:
        store = options.store()
        if approval_id:
            state_key = store.lookup_approval_id(approval_id)
            if state_key is None:
                raise RequestError(unknown_approval_id(approval_id), "E503")
            origin = tokens.origin_of(state_key)
        elif state_key:
            origin = tokens.origin_of(state_key)
        else:
            parsed = _checked_token(token, store)
            state_key, origin = parsed.state_key, parsed.origin
        not_found = ("Resume state not found" if decision.cancel
                     else f"{origin.capitalize()} resume state not found")
        parked = store.read_parked(state_key)
        if parked is None:
            return _unparked(store, state_key, decision, not_found, approval_id)
        if decision.cancel:
            return _cancel_parked(store, parked, approval_id, not_found)
        if not parked.authentic(store.verification_keys()):  # first: expiry is not covered
            raise RequestError(NOT_AUTHENTIC, "T434", kind="runtime_error")
        _refuse_expired(parked.expires_at)
        checkpoint_ttl_ms(options)  # a bad TTL is refused before anything runs
        frame, program = _load(store, parked)
        pending = frame.pending
        approved_by = _check_decision(frame, program, decision, options.env)
        if scope.cancelled:  # the caller gave up before anything was taken: it still waits
            raise RequestError("the resume was cancelled before it began; the checkpoint still "
                               "waits", "T422", kind="runtime_error")
        taken = lifecycle.claim(store, parked, frame, decision=_decision_name(decision),
                                approved_by=approved_by or _approver(options.env),
                                lease_s=claim_lease_s(options),
                                via="approvalId" if approval_id else "token",
                                step=_step_reached(program, frame))
        if taken is None:
            return _unparked(store, state_key, decision, not_found, approval_id)
        return _run_claimed(taken, program, frame, decision, approved_by, options,
                            evolve(settings, cwd=frame.cwd, mode=frame.mode), scope)
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)


def _run_claimed(taken: lifecycle.Claim, program: Program, frame: Frame, decision: Decision,
                 approved_by: str | None, options: Options, settings: Settings,
                 scope: Scope) -> dict:
    """Step a claimed checkpoint forward, and end its claim by what became of the run: the
    next state durable (a checkpoint saved, or the final envelope made) is `finished`; a store
    that failed to take that next state, an exception, an interrupt, or a caller who cancelled
    the run while it ran leave it `in_doubt`, with why and the step reached."""
    if decision.approve is False:
        taken.finish("cancelled")
        return ok_envelope("cancelled", [])
    taken.progress = lambda: _step_reached(program, frame)
    try:
        machine.apply_decision(frame, decision.response, approved_by)
        envelope = _drive(program, frame, options, settings, scope)
    except RequestError as exc:  # a limit at the end (T423, T424, T425): the run's final answer
        taken.finish("error", exc.envelope["error"].get("code"))
        raise
    except StoreError as exc:
        taken.doubt(f"its next checkpoint could not be saved: {exc}", _step_reached(program,
                                                                                     frame))
        envelope = store_error(exc)
        envelope["error"]["checkpoint"] = lifecycle.status(taken.store, taken.state_key).summary()
        return envelope
    except BaseException as exc:  # a bug, KeyboardInterrupt, SystemExit: the run stops here
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        taken.doubt(f"the resume was interrupted ({what[:300]})", _step_reached(program, frame))
        raise
    if not envelope.get("ok") and scope.cancelled:
        taken.doubt(f"the resume was cancelled by its caller while it ran "
                    f"({envelope['error'].get('code')}: {envelope['error']['message'][:300]})",
                    _step_reached(program, frame))
        envelope["error"]["checkpoint"] = lifecycle.status(taken.store, taken.state_key).summary()
        return envelope
    if envelope.get("ok"):
        halt = envelope.get("requiresApproval") or envelope.get("requiresInput")
        next_key = None
        if halt:
            try:
                next_key = tokens.decode(halt["resumeToken"]).state_key
            except tokens.TokenError:
                next_key = None
        taken.finish(envelope["status"], None, next_key, (halt or {}).get("approvalId"))
    else:
        taken.finish("error", envelope["error"].get("code"))
    return envelope


def _decision_name(decision: Decision) -> str:
    if decision.cancel:
        return "cancel"
    if decision.has_response:
        return "input"
    return "approve" if decision.approve else "reject"


def _approver(env: Mapping[str, str]) -> str | None:
    """Who answers, as the environment says (recorded in the checkpoint's history)."""
    return (env.get("LOBSTER_APPROVAL_APPROVED_BY") or "").strip() or None


def _step_reached(program: Program, frame: Frame) -> str | None:
    """The step the frame is in (the last instruction it ran), for a record in doubt."""
    step = program.step_at(max(frame.pc - 1, 0))
    return step.id if step is not None else None


def _cancel_parked(store: StateStore, parked, approval_id: str | None, not_found: str) -> dict:
    """End a parked checkpoint. Nothing in it runs, so nothing limits this: a frame too large,
    unreadable or not authentic is cancelled too. Its approval id goes with it (the frame's
    own only when this store wrote the frame; an id left behind is collected by `gc`), and its
    record stays, `cancelled`, as a tombstone."""
    ids = {approval_id}
    frame = None
    if parked.authentic(keys_if_any(store)):
        try:
            frame = codec.load_frame(parked.blob)
            ids.add(frame.pending.approval_id)
        except (LoadError, AttributeError):
            frame = None
    before = lifecycle.cancel(store, parked.state_key, frame)
    if before.state not in (lifecycle.WAITING, lifecycle.EXPIRED):  # taken meanwhile
        return _unparked(store, parked.state_key, Decision(), not_found, approval_id)
    for halt_id in ids:
        store.remove_approval_id(halt_id)
    return ok_envelope("cancelled", [])


def unknown_approval_id(approval_id: str) -> str:
    """The refusal of an approval id that names nothing. A long one is not echoed back whole
    (an id is 8 hex digits; what a caller sent by mistake can be anything, of any size)."""
    shown = approval_id if len(approval_id) <= 40 else \
        f"{approval_id[:16]}... ({len(approval_id)} characters)"
    return f'Approval ID "{shown}" not found or expired'


def cancel_state(options: Options, state_key: str) -> dict:
    """Cancel the checkpoint parked under `state_key` (as `lobster pending` lists it), or clear
    its claim record when its resume did not finish: a resume with `cancel: true`."""
    return _resume(options, Settings.of(options), Scope(), Decision(cancel=True),
                   state_key=state_key)


def _unparked(store: StateStore, state_key: str, decision: Decision, not_found: str,
              approval_id: str | None) -> dict:
    """No frame to resume, and the checkpoint's record says why: being resumed right now (a
    live lease: T435), ended (finished, cancelled or expired: T436, the original's "not found"
    words, and how and when it ended in `error.checkpoint`), in doubt (T432; a cancel clears
    it) or never known (T430)."""
    current = lifecycle.status(store, state_key)
    if current.state == lifecycle.IN_DOUBT:
        if decision.cancel:
            lifecycle.cancel(store, state_key)
            halted = current.event("halted") or {}
            claimant = current.claim.claimant if current.claim else None
            for halt_id in (approval_id, halted.get("approvalId"),
                            claimant.halt_id if claimant else None):
                if halt_id and approval_id_form(halt_id) == halt_id:
                    store.remove_approval_id(halt_id)
            return ok_envelope("cancelled", [])
        claimed = current.event("claimed") or {}
        if claimed:
            at, who = claimed.get("at"), claimed.get("by")
        elif current.claim is not None:
            claimant = current.claim.claimant
            at = current.claim.claimed_at
            who = f"{claimant.pid}@{claimant.host}" if claimant else None
        else:
            at, who = None, None
        when = iso_time(at) if isinstance(at, (int, float)) else "an unknown time"
        step = f" at step {current.step}" if current.step else ""
        error = RequestError(f"This checkpoint was claimed at {when} by "
                             f"{who or 'a resume whose record was lost'} and did not finish"
                             f"{step}: {current.reason} (its step may have run; `lobster "
                             "pending` lists it, `lobster history` shows it, a cancel clears "
                             "it)", "T432", kind="runtime_error")
    elif current.state == lifecycle.CLAIMED:
        error = RequestError(not_found, "T435", kind="runtime_error")
    elif current.state in lifecycle.ENDED:
        if approval_id:  # the original drops an id once its checkpoint ends, by whichever
            error = RequestError(unknown_approval_id(approval_id), "E505")  # way it was resumed
        else:
            error = RequestError(not_found, "T436", kind="runtime_error")
    else:
        raise RequestError(not_found, "T430", kind="runtime_error")
    error.envelope["error"]["checkpoint"] = {"stateKey": state_key, **current.summary()}
    raise error


LEASE_VARIABLE = "LOBSTER_CLAIM_LEASE"
TOMBSTONE_VARIABLE = "LOBSTER_TOMBSTONE_TTL"


def claim_lease_s(options: Options) -> float:
    """How long a claim's lease runs before its resume must renew it (renewed every third of
    it): LOBSTER_CLAIM_LEASE (a duration, at least 1s), else 30 s. A bad value is E004."""
    return _env_duration_s(options.env, LEASE_VARIABLE, lifecycle.LEASE_S, bounds.CLAIM_LEASE)


def tombstone_s(options: Options) -> float:
    """How long the record of an ended checkpoint is kept before gc removes it:
    LOBSTER_TOMBSTONE_TTL (a duration), else 7 days. A bad value is E004."""
    return _env_duration_s(options.env, TOMBSTONE_VARIABLE, lifecycle.TOMBSTONE_S,
                           bounds.TOMBSTONE_TTL)


def _env_duration_s(env: Mapping[str, str], name: str, default: float,
                    bound: bounds.Bound) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        return bound.parse(raw, name) / 1000
    except bounds.BoundError as exc:
        raise RequestError(str(exc), "E004", kind="runtime_error") from None


def _refuse_expired(expires_at: float | None) -> None:
    if expires_at is not None and expires_at <= time.time():
        raise RequestError(f"This checkpoint expired at {iso_time(expires_at)}; it can only be "
                           "cancelled (or collected by `lobster gc`)", "T433",
                           kind="runtime_error")


def iso_time(seconds: float) -> str:
    """Unix seconds -> `2026-12-03T19:04:05Z`; any stored time, however absurd, gives a date
    (clamped to 1970..9999: one bad record never breaks a listing)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(bounds.clamp_time(seconds)))


def request_ttl_ms(value: Any, name: str) -> int | None:
    """A call's own checkpoint TTL (`checkpointTtl`, `--checkpoint-ttl`): a duration such as
    30m, 12h or 7d, or a positive integer of ms, at most bounds.CHECKPOINT_TTL; None when not
    given. Else a parse error (E001) naming the limit."""
    if value is None:
        return None
    try:
        return bounds.CHECKPOINT_TTL.parse(value, name)
    except bounds.BoundError as exc:
        raise RequestError(exc.message) from None


def checkpoint_ttl_ms(options: Options) -> int | None:
    """How long a new checkpoint stays resumable by default (under a call's own TTL and the
    workflow's `checkpoint_ttl`): `Options.checkpoint_ttl_ms`, else LOBSTER_CHECKPOINT_TTL,
    else forever. A bad value, or one past bounds.CHECKPOINT_TTL, is a RequestError (E004)."""
    ttl = options.checkpoint_ttl_ms
    ttl_bound = bounds.CHECKPOINT_TTL
    if ttl is not None:
        try:
            return ttl_bound.parse(ttl, "checkpoint_ttl_ms", text=False)
        except bounds.BoundError as exc:
            message = (f"checkpoint_ttl_ms must be a positive number of milliseconds, got "
                       f"{bounds.shown(ttl)}" if exc.kind == "form" else exc.message)
            raise RequestError(message, "E004", kind="runtime_error") from None
    raw = (options.env.get("LOBSTER_CHECKPOINT_TTL") or "").strip()
    if not raw:
        return None
    try:
        return ttl_bound.parse(raw, "LOBSTER_CHECKPOINT_TTL")
    except bounds.BoundError as exc:
        message = (f"LOBSTER_CHECKPOINT_TTL must be a duration such as 7d, 12h or 30m, got "
                   f"{bounds.shown(raw)}" if exc.kind == "form" else exc.message)
        raise RequestError(message, "E004", kind="runtime_error") from None


def signing_key(store: StateStore) -> bytes:
    """The key a new checkpoint is signed with: a SigningKeyError (T451, T452) or a store that
    cannot be written (T450) is refused as a RequestError before anything runs."""
    try:
        return store.key()
    except OSError as exc:  # the state dir is a file, read-only, full...
        raise RequestError(f"The state store at {store.location} cannot be written: "
                           f"{exc.strerror or exc}", "T450", kind="runtime_error") from None


def keys_if_any(store: StateStore) -> list[bytes]:
    """Every key a frame or token of this store may be signed with, for what needs no key
    (a cancel, naming a checkpoint by its token): a key set that cannot be read is empty."""
    try:
        return store.keys()
    except StoreError:
        return []


def store_problem(options: Options) -> str | None:
    """Why the state store cannot hold a checkpoint, or None: `lobster doctor` asks."""
    try:
        store = options.store()
        location = getattr(store, "location", "")
        if location and "://" not in location and os.path.exists(location) and not os.path.isdir(location):
            return f"the state directory {location} is not a directory"
        store.key()  # reads, or creates, the signing key: the store is there and writable
        keys = store.keys()
        lost = sum(not parked.authentic(keys) for parked in store.list_parked())
    except SigningKeyError as exc:
        return str(exc)
    except (OSError, StoreError) as exc:
        return f"the state store cannot be used: {getattr(exc, 'strerror', None) or exc}"
    if lost:
        return (f"{lost} checkpoint{'' if lost == 1 else 's'} in the state store at "
                f"{store.location} {'is' if lost == 1 else 'are'} signed by no key of its "
                "signing key set (a lost key, or a frame planted, edited or written by an "
                "earlier version): `lobster pending` lists them as unverifiable; restore the "
                "key, or cancel them")
    return None


def store_error(exc: StoreError) -> dict:
    """The store could not be reached, read or written, or its key set cannot be used
    (T451, T452): nothing was claimed or consumed."""
    return error_envelope("runtime_error", str(exc), getattr(exc, "code", "T450"))


def _checked_token(token: str | None, store: StateStore) -> tokens.Token:
    try:
        parsed = tokens.decode(token or "")
        tokens.verify(parsed, store.verification_keys())
    except tokens.TokenError as exc:
        raise RequestError(exc.message, exc.code) from None
    return parsed


NOT_AUTHENTIC = ("Resume state was not written by this state store (a frame or program "
                 "planted, edited or from an earlier version); refused: a cancel removes it")


def _load(store: StateStore, parked) -> tuple[Frame, Program]:
    """The parked frame (its MAC already checked: the bytes this store wrote under this key)
    and its program, each checked: the program's content hash (the one the frame names), then
    the frame against its program. Refusals consume nothing."""
    try:
        frame = codec.load_frame(parked.blob)
        program_blob = store.load_program_bytes(frame.program_hash)
        if program_blob is None:
            raise LoadError(f"program {frame.program_hash} is missing from the state directory")
        program = codec.load_program(program_blob)
    except codec.NotAuthentic:
        raise RequestError(NOT_AUTHENTIC, "T434", kind="runtime_error") from None
    except LoadError as exc:
        raise RequestError(f"Resume state is corrupt: {exc}", "T431", kind="runtime_error") from None
    if program.hash != frame.program_hash:
        raise RequestError(NOT_AUTHENTIC, "T434", kind="runtime_error")
    if frame.pending is None:
        raise RequestError("Resume state is corrupt: frame does not match its program", "T431",
                           kind="runtime_error")
    try:
        codec.check_frame(frame, program)
    except LoadError as exc:
        raise RequestError(f"Resume state is corrupt: {exc}", "T431", kind="runtime_error") from None
    return frame, program


def _check_decision(frame: Frame, program: Program, decision: Decision,
                    env: Mapping[str, str]) -> str | None:
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
    from vm.core.schema import first_error

    problem = first_error(pending.schema, decision.response)
    if problem is not None:
        where, message = problem
        # an `ask` stage inside a workflow `pipeline:` step is named by that step, as the
        # original names it
        step = program.halts[pending.halt].step or ""
        what = f"Workflow input step {step}" if step else "pipeline input"
        raise RequestError(f"{what} response failed schema validation at {where}: {message}",
                           "E512")
    return None


def approver_fields(rules: ApproverRules) -> dict[str, Any]:
    """The approver rules in force, as an approval request shows them."""
    fields: dict[str, Any] = {}
    if rules.initiated_by:
        fields["initiatedBy"] = rules.initiated_by
    if rules.required_approver:
        fields["requiredApprover"] = rules.required_approver
    if rules.require_different_approver:
        fields["requireDifferentApprover"] = True
    return fields


def _check_approver(pending, env: Mapping[str, str]) -> str | None:
    approved_by = (env.get("LOBSTER_APPROVAL_APPROVED_BY") or "").strip() or None
    rules = pending.approvers if isinstance(pending, StepApprovalWait) else ApproverRules()
    required, different = rules.required_approver, rules.require_different_approver
    initiated = rules.initiated_by
    who = f"Workflow step {pending.step} approval"
    if (required or different) and not approved_by:
        raise RequestError(f"{who} requires approver identity; set LOBSTER_APPROVAL_APPROVED_BY",
                           "E513")
    if required and approved_by != required:
        raise RequestError(f"{who} requires approver '{required}', got '{approved_by}'", "E513")
    if different and not initiated:  # fail closed: anyone could be the initiator
        raise RequestError(f"{who} requires an approver other than its initiator, but no "
                           "initiator was recorded (set LOBSTER_APPROVAL_INITIATED_BY or "
                           "initiated_by when running); refused", "E513")
    if different and approved_by == initiated:
        raise RequestError(f"{who} must be granted by someone other than '{initiated}'", "E513")
    return approved_by
