"""Running: compile (unless given a program), start a frame, drive it to its end, its first
halt (parked: vm/service/protocol/park.py) or a trap, and answer with the envelope. A run that
needs compiling asks the compiler frontend; nothing else here parses."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from vm.core import json_read
from vm.engine import machine
from vm.host.children import Scope
from vm.host.store import StoreError
from vm.isa.frame import Frame
from vm.isa.program import Program
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.service.protocol.envelope import (RequestError, as_json_data, check_envelope_size,
                                          check_unicode, error_envelope, internal_error,
                                          not_unicode, ok_envelope, store_error,
                                          store_unwritable)
from vm.service.protocol.options import Options, Settings, checkpoint_ttl_ms, request_ttl_ms

# vm.service.protocol.park (and the token module under it) is imported by a program that can
# halt, when it needs it: a run that cannot halt never loads them

if TYPE_CHECKING:
    from vm.engine.events import Emitter
    from vm.service.frontend import Frontend
    from vm.service.messages import Envelope

MAX_PIPELINE_BYTES = 64 * 1024  # inline pipeline text, in UTF-8 bytes (E105)


def is_workflow_path(pipeline: str, cwd: str) -> bool:
    """Whether `pipeline` names a workflow file under `cwd` (else it is pipeline text, as the
    reference runs it)."""
    text = pipeline.strip()
    if "|" in text or not text.lower().endswith(WORKFLOW_EXTENSIONS):
        return False
    return os.path.isfile(os.path.join(cwd, text))


def compiler(given: Frontend | None) -> Frontend:
    """The compiler: the one `given` (by the CLI or an embedder), else the installed one."""
    if given is not None:
        return given
    from vm.service.frontend import FrontendMissing, find_frontend

    try:
        return find_frontend()
    except FrontendMissing as exc:
        raise RequestError(str(exc), "E003") from None


def compile_refused(frontend: Frontend, exc: Exception) -> RequestError:
    """A compile error as a refusal: the first diagnostic's message, code and location."""
    fields = frontend.error_fields(exc)
    return RequestError(fields["message"], fields["code"], fields.get("location"))


def compile_source(pipeline: str, options: Options, cwd: str, workflow: bool = False) -> Program:
    """The program for inline pipeline text, or for a workflow file under `cwd`."""
    frontend = compiler(options.frontend)
    refused_ask_schema = getattr(frontend, "refused_ask_schema", None)  # optional, as below
    try:
        if workflow:
            return frontend.compile_workflow(os.path.join(cwd, pipeline.strip()), options.store())
        return frontend.compile_pipeline(pipeline, options.store())
    except frontend.CompileError as exc:
        if workflow:
            file_notes(frontend, os.path.join(cwd, pipeline.strip()), options.log, exc)
        elif refused_ask_schema is not None:
            from vm.core.schema_compile import compile_notes

            schema = refused_ask_schema(pipeline, exc)
            if schema is not None:
                compile_notes(schema, options.log)
        if options.report is not None:
            options.report(exc)
        raise compile_refused(frontend, exc) from None


def parse_args_json(args_json: str | None, command: str = "run") -> dict[str, Any]:
    """`COMMAND --args-json`: a JSON object, with the reference's two error texts."""
    if args_json is None:
        return {}
    try:
        args = json_read.parse_args_json(args_json, command)
    except json_read.JSONTooDeep as exc:
        raise RequestError(str(exc), "E007") from None
    except ValueError as exc:
        from vm.core.detail import json_detail

        raise RequestError(str(exc), detail=json_detail(exc.__cause__)) from None
    check_unicode(args, f"{command} --args-json")
    return args


def check_pipeline_text(pipeline: str) -> None:
    """Inline pipeline text: at most MAX_PIPELINE_BYTES, Unicode, no NUL byte."""
    try:
        size = len(pipeline.encode("utf-8"))
    except UnicodeEncodeError:
        raise not_unicode("pipeline") from None
    if size > MAX_PIPELINE_BYTES:
        raise RequestError(f"pipeline text is {size} bytes, over the limit of "
                           f"{MAX_PIPELINE_BYTES}", "E105")


def run(pipeline: str, options: Options, *, args_json: str | None = None,
        program: Program | None = None, file: bool = False, scope: Scope | None = None,
        checkpoint_ttl: str | int | None = None) -> Envelope:
    """Compile (unless given a program) and run to the end or the first halt, bounded by the
    options. `pipeline` is inline text, or a workflow file path (always one when `file` is
    set). `checkpoint_ttl` (a duration such as "30m", or ms) is how long a checkpoint of this
    call stays resumable, before the workflow's own and the options' default. The envelope is
    JSON data, for an embedder (`as_json_data`)."""
    return cast("Envelope", as_json_data(run_js(
        pipeline, options, args_json=args_json, program=program, file=file, scope=scope,
        checkpoint_ttl=checkpoint_ttl)))


def run_js(pipeline: str, options: Options, *, args_json: str | None = None,
           program: Program | None = None, file: bool = False, scope: Scope | None = None,
           checkpoint_ttl: str | int | None = None) -> dict[str, Any]:
    """`run`, its envelope as the run made it: a value in it may hold undefined
    (`js.UNDEFINED`), which only our JSON writer takes (it leaves it out, as JSON.stringify
    does). For the CLI, which writes the envelope with it."""
    try:
        settings = Settings.of(options, request_ttl_ms(checkpoint_ttl, "checkpoint_ttl"))
        return run_settled(pipeline, options, settings, scope or Scope(), args_json=args_json,
                           program=program, file=file)
    except RequestError as exc:
        return cast("dict[str, Any]", exc.envelope)
    except Exception as exc:  # noqa: BLE001 - the last resort, as in `handle`
        return internal_error(exc)


def run_settled(pipeline: str, options: Options, settings: Settings, scope: Scope, *,
                args_json: str | None = None, program: Program | None = None,
                file: bool = False) -> dict[str, Any]:
    """`run` under settings already read (from a tool request, or the options)."""
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
        if workflow:
            load_notes(program, options.log)
        checked = None
        if program.halts:  # it may park: its key is checked before anything runs
            from vm.service.protocol.park import signing_key

            checked = (signing_key(options.store()), time.monotonic())
        frame = machine.new_frame(program, cwd=settings.cwd, mode=settings.mode, args=args,
                                  source=os.path.join(settings.cwd, pipeline.strip())
                                  if workflow else None)
        frame.origin = "workflow" if workflow else "pipeline"
        return drive(program, frame, options, settings, scope, checked)
    except RequestError as exc:
        return cast("dict[str, Any]", exc.envelope)
    except StoreError as exc:
        return store_error(exc)


def file_notes(frontend: Frontend, path: str, log: Callable[[str], None],
               refused: Exception | None = None) -> None:
    """What the original's schema compiles warn as it loads a workflow file (its run, dry run
    and `graph` load it) to `log`: vm.core.schema.compile_notes of each input schema it
    compiles before the error it is `refused` with (a CompileError), if any."""
    schemas = getattr(frontend, "input_schemas", None)
    if schemas is None:
        return
    from vm.core.schema_compile import compile_notes

    message = None if refused is None else frontend.error_fields(refused)["message"]
    for schema in schemas(path, message):
        compile_notes(schema, log)


def load_notes(program: Program, log: Callable[[str], None]) -> None:
    """What the original's schema compiles warn as it loads a workflow file: each input step's
    responseSchema, in step order (vm.core.schema.compile_notes)."""
    from vm.isa.ops import StepInput

    for site in program.halts:
        if isinstance(site, StepInput) and site.schema is not None:
            from vm.core.schema_compile import compile_notes  # only where there is one

            compile_notes(site.schema, log)


def drive(program: Program, frame: Frame, options: Options, settings: Settings,
          scope: Scope, checked: tuple[bytes, float] | None = None) -> dict[str, Any]:
    """Step the frame to its end, a halt (parked) or a trap, with the options' event
    listener (if any) hearing it. The envelope holds the run's values as they are (undefined
    included): an exit to an embedder makes it JSON data (`as_json_data`), the CLI writes it
    with our JSON writer. `checked`: the signing key this run checked before it began, and
    when (time.monotonic), which a halt soon after signs with (park.py)."""
    if options.on_event is None:
        return _drive_with(program, frame, options, settings, scope, None, checked)
    from vm.engine.events import Emitter

    events = Emitter(options.on_event, options.log)
    try:
        envelope = _drive_with(program, frame, options, settings,
                               Scope(scope, listener=events), events, checked)
    finally:
        dropped = events.close()
    if dropped:  # additive: the events this run could not hand to the callback
        envelope = {**envelope, "eventsDropped": dropped}
    return envelope


def _drive_with(program: Program, frame: Frame, options: Options, settings: Settings,
                scope: Scope, events: Emitter | None, checked: tuple[bytes, float] | None = None) -> dict[str, Any]:
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
        return error_envelope(outcome.code, outcome.message, location, outcome.detail)
    if isinstance(outcome, machine.Finished):
        envelope = ok_envelope("ok", outcome.output)
        check_envelope_size(envelope, settings)
        return envelope
    from vm.service.protocol.park import park

    try:  # park checks its envelope's size before it saves anything
        envelope = park(program, outcome.frame, options, settings, checked)
    except OSError as exc:  # the state dir is a file, read-only, full...
        raise StoreError(store_unwritable(options.store().location, exc)) from None
    if events is not None:
        pending: Any = outcome.frame.pending  # a halted frame's: one of the gate kinds' records
        events.halted(outcome.frame.pc - 1, pending.kind, pending.approval_id, pending.prompt)
    return envelope
