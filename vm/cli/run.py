"""`lobster run` (and `lobster PIPELINE`): run a pipeline, a workflow file, a compiled program
or a file of pipeline text, in tool mode (one envelope) or human mode (text, progress, the
resume hint); `--dry-run` prints the plan instead."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from vm.cli.common import (NO_VALUE, fail, file_problem, flag, human_error, is_terminal, listener,
                           print_json, refuse, shown, timeout, usage_error)
from vm.cli.frontdoor import pipeline_words
from vm.cli.specs import RUN
from vm.core import json_write
from vm.core.patterns import compiled
from vm.engine.outcome import Failed
from vm.isa.frame import Pending, PipelineApproveWait, PipelineAskWait
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.service.protocol.envelope import RequestError, exit_code, ok_envelope
from vm.service.protocol.options import Options
from vm.service.protocol.running import (compile_refused, compile_source, compiler, file_notes,
                                         is_workflow_path, parse_args_json, run_js)

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

_SAFE = compiled(r"^[A-Za-z0-9_\-./:=@,+%]+$")
RUN_FLAGS = tuple(f.name for f in RUN.flags)  # the table `lobster help run` shows
RUN_SWITCHES = tuple(f.name for f in RUN.flags if not f.value)
MODES = ("tool", "human")
DECLINED_EXIT = 1  # a declined approval ends the run with the original's status


def _quote(token: str) -> str:
    """Quote one argv token for the pipeline tokenizer (its own `\\'` escape)."""
    if token and _SAFE.match(token):
        return token
    return "'" + token.replace("'", "\\'") + "'"


class RunArgs:
    """`lobster run`'s own flags, and the words that make the pipeline."""

    def __init__(self) -> None:
        self.mode, self.file, self.args_json, self.dry_run = None, None, None, False
        self.quiet, self.events, self.timeout = False, None, None
        self.progress = False
        self.checkpoint_ttl: str | None = None
        self.rest: list[str] = []

    def take(self, argv: list[str], i: int) -> int | None:
        """Read the flag at argv[i] into self; the index after it, or None: not one of ours."""
        word = argv[i]
        if not word.startswith("--"):
            return None
        name = word[2:].split("=", 1)[0]
        if name not in RUN_FLAGS:
            return None
        if name in RUN_SWITCHES:
            setattr(self, name.replace("-", "_"), True)
            return i + 1
        value, i = flag(argv, i, name)
        if value is None and name in ("mode", "events", "timeout", "checkpoint-ttl"):
            value = NO_VALUE  # given without one: refused, never taken as not given
        setattr(self, name.replace("-", "_"), value)
        return i


def parse_run(argv: list[str]) -> RunArgs:
    """Our flags before the first pipeline word; after a single one (a workflow or pipeline
    file, or a whole quoted pipeline) too, when every word left is one of our flags:
    `lobster run FILE --args-json J --mode tool`. Anything else belongs to the pipeline."""
    ns = RunArgs()
    i = 0
    while i < len(argv):
        after = None if ns.rest else ns.take(argv, i)
        if after is None:
            ns.rest.append(argv[i])
            i += 1
        else:
            i = after
    if len(ns.rest) > 1:
        trial, j = RunArgs(), 1
        words = ns.rest
        while j < len(words):
            after = trial.take(words, j)
            if after is None:
                break
            j = after
        else:  # all of them ours
            # (`--dry-run` after a pipeline belongs to it, as in the original)
            if not trial.dry_run or _names_file(words[0]):
                for name in ("mode", "file", "args_json", "events", "timeout", "checkpoint_ttl"):
                    if getattr(trial, name) is not None:
                        setattr(ns, name, getattr(trial, name))
                ns.dry_run = ns.dry_run or trial.dry_run
                ns.quiet = ns.quiet or trial.quiet
                ns.progress = ns.progress or trial.progress
                ns.rest = words[:1]
    return ns


def _names_file(word: str) -> bool:
    return (is_workflow_path(word, os.getcwd())
            or (word.lower().endswith((".lbc", ".pipeline")) and os.path.isfile(word)))


def cmd_run(argv: list[str], frontend: Frontend | None = None) -> int:
    ns = parse_run(argv)
    ns.file = ns.file or None  # `--file=` names no file, as in the original
    refused = pipeline_words(ns.rest) if ns.file is None else None  # SPEC 9.20
    ns.mode = "human" if ns.mode is None else ns.mode
    if refused is not None:
        return refuse(refused, tool=ns.mode == "tool")
    if ns.mode not in MODES:
        return usage_error(RequestError(f"run --mode must be tool or human (got "
                                        f"{shown(ns.mode)})", "E020"))
    mode, file, args_json, dry_run, rest = ns.mode, ns.file, ns.args_json, ns.dry_run, ns.rest
    # a person at a terminal: halts are answered here (vm/cli/terminal.py)
    person = (mode == "human" and not dry_run and is_terminal(sys.stdin)
              and is_terminal(sys.stderr))
    try:
        timeout_ms = timeout(ns.timeout, "run")
        # progress lines only on a terminal, or when asked for (SPEC 9.19): on a pipe,
        # human-mode stderr is the original's
        visible = ns.progress or is_terminal(sys.stderr)
        on_event, progress = listener(ns.events, "run", mode == "human" and not ns.quiet
                                      and visible)
    except RequestError as exc:
        return print_json(exc.envelope) or 2 if mode == "tool" else usage_error(exc)
    workflow = file is not None
    program = None
    if file is not None:
        problem = file_problem(file)
        if problem is not None:
            return fail(mode, RequestError(problem, "E005"))
        pipeline = file
    elif len(rest) == 1:
        pipeline = rest[0]
        try:
            loaded = _program_file(pipeline)
        except RequestError as exc:
            return print_json(exc.envelope) or 2 if mode == "tool" else usage_error(exc)
        if isinstance(loaded, str):
            pipeline = loaded  # a .pipeline file's text
        elif loaded is not None:
            program, workflow = loaded
    else:
        pipeline = " ".join(_quote(word) for word in rest)
    if not pipeline.strip() and file is None:
        code = fail(mode, RequestError("Empty pipeline", "E101"))
        if not rest and mode == "human" and is_terminal(sys.stderr):  # `lobster run` alone
            from vm.cli.help import subcommand_help

            sys.stderr.write("\n" + subcommand_help("run"))
        return code
    rendered: list[str] = []
    reported: list = []
    # the engine asks an approve stage's question itself only when no one answers halts here
    options = Options(mode=mode, write=rendered.append, stdin_is_tty=sys.stdin.isatty(),
                      ask_line=None if person else _asker(progress), log=sys.stderr.write,
                      report=reported.append, frontend=frontend, timeout_ms=timeout_ms,
                      on_event=on_event)
    if dry_run:
        return _dry_run(pipeline, options, workflow, args_json)
    try:
        envelope = run_js(pipeline, options, args_json=args_json, file=workflow,
                          program=program, checkpoint_ttl=ns.checkpoint_ttl)
        if person and envelope["ok"]:
            emitted = _emit_check(reported, options, pipeline, program)
            envelope = _answer_halts(envelope, options, progress, reported, ns.checkpoint_ttl,
                                     emitted)
    finally:
        if progress is not None:
            progress.close()
    if mode == "tool":
        print_json(envelope)
        return exit_code(envelope)
    if envelope.get("status") == "cancelled" and person:
        sys.stderr.write("cancelled\n")  # declined: a calm end, with the original's exit code
        return DECLINED_EXIT
    if not envelope["ok"]:
        return human_error(envelope, _rendered(options, reported, pipeline, workflow))
    sys.stdout.write("".join(rendered))
    is_workflow = workflow or is_workflow_path(pipeline, os.getcwd())
    if envelope["status"] == "ok":
        if not rendered and (envelope["output"] or not is_workflow):
            print_json(envelope["output"])
    else:
        if is_workflow:
            print_json({k: envelope[k] for k in ("status", "output", "requiresApproval",
                                                 "requiresInput")})
        elif not rendered:  # the request item, as the original prints it (SPEC 9.13)
            print_json([_request_item(envelope, reported)])
        if not ns.quiet:
            sys.stdout.flush()
            sys.stderr.write(f"lobster: to continue: {resume_command(envelope)}\n")
    return 0


def _request_item(envelope: dict, reported: list) -> dict:
    """A pipeline's halt as the original prints it in human mode: the request item its
    `approve` or `ask` stage emitted (the items that reached the gate, no token)."""
    pending = next((r for r in reported if isinstance(r, Pending)), None)
    items = list(pending.items) if pending is not None else []
    approval = envelope.get("requiresApproval")
    if approval:
        item = {"type": "approval_request", "prompt": approval["prompt"], "items": items}
        if approval.get("preview"):
            item["preview"] = approval["preview"]
        return item
    request = envelope.get("requiresInput") or {}
    item = {"type": "input_request", "prompt": request.get("prompt"),
            "responseSchema": request.get("responseSchema")}
    if "subject" in request:
        item["subject"] = request["subject"]
    item["items"] = items
    return item


def _program_file(path: str):
    """`lobster run x.lbc`: (the compiled program, whether it came from a workflow file);
    `lobster run x.pipeline`: the file's pipeline text; None for anything else."""
    lowered = path.lower()
    if not lowered.endswith((".lbc", ".pipeline")) or "|" in path or not os.path.isfile(path):
        return None
    if lowered.endswith(".pipeline"):
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise RequestError(f"cannot read {path}: {exc}", "E023") from None
    from vm.isa import codec

    try:
        with open(path, "rb") as fh:
            program = codec.load_program(fh.read())
    except OSError as exc:
        raise RequestError(f"cannot read {path}: {exc.strerror}", "E023") from None
    except codec.LoadError as exc:
        raise RequestError(f"{path} is not a compiled Lobster program: {exc}", "E023") from None
    source = program.header.source_name.lower()
    return program, source.endswith(WORKFLOW_EXTENSIONS)


def resume_command(envelope: dict) -> str:
    """The `lobster resume ...` line that continues a halted run."""
    import shlex

    approval = envelope.get("requiresApproval")
    if approval:
        where = (f"--id {approval['approvalId']}" if approval.get("approvalId")
                 else f"--token {approval['resumeToken']}")
        return f"lobster resume {where} --approve yes   (or --approve no)"
    request = envelope.get("requiresInput") or {}
    answer = request.get("defaults") if "defaults" in request else example_answer(
        request.get("responseSchema"))
    return (f"lobster resume --token {request.get('resumeToken')} --response-json "
            f"{shlex.quote(json_write.json_compact(answer))}")


def example_answer(schema) -> object:
    """A value of the schema's shape to edit: required properties with empty values."""
    if not isinstance(schema, dict):
        return None
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [n for n in schema.get("required") or [] if isinstance(n, str)]
        return {name: example_answer(props.get(name)) for name in required}
    return {"string": "", "integer": 0, "number": 0, "boolean": False, "array": []}.get(kind)


def _dry_run(pipeline: str, options: Options, workflow: bool = False,
             args_json: str | None = None) -> int:
    """Check the pipeline (or workflow file) and print its plan to stderr; run nothing."""
    mode = options.mode
    try:
        frontend = compiler(options.frontend)
        try:
            path = None
            if workflow or is_workflow_path(pipeline, os.getcwd()):
                args = parse_args_json(args_json)
                path = os.path.join(os.getcwd(), pipeline.strip())
                plan = frontend.plan_workflow(path, args)
                file_notes(frontend, path, sys.stderr.write)
            else:
                plan = frontend.plan_pipeline(pipeline)
        except frontend.CompileError as exc:
            if path is not None:
                file_notes(frontend, path, sys.stderr.write, exc)
            raise compile_refused(frontend, exc) from None
    except RequestError as exc:
        return fail(mode, exc)
    sys.stderr.write(plan)
    if mode == "tool":
        print_json(ok_envelope("ok", []))
    return 0


def _rendered(options: Options, reported: list, pipeline: str, workflow: bool) -> str | None:
    """The human rendering of the compile error or runtime trap a run reported: the same
    `file:line:col: error[CODE]: message`, source line and caret for both."""
    if not reported:
        return None
    problem = reported[0]
    if not isinstance(problem, Failed):
        return compiler(options.frontend).render_error(problem)
    from vm.core.source import Source, render_trap

    if workflow or is_workflow_path(pipeline, os.getcwd()):
        main = os.path.join(os.getcwd(), pipeline.strip())
        return render_trap(problem, base_dir=os.path.dirname(os.path.realpath(main)))
    return render_trap(problem, source=Source("<pipeline>", pipeline))


def _emit_check(reported: list, options: Options, pipeline: str, program):
    """Whether the halt the run reported last is an `approve --emit` or `ask --emit` stage:
    it halts even at a terminal, as in the original. Only a pipeline's stages can be one; the
    program is compiled again (the same bytes) to look, the first time it is needed."""
    compiled = [program]

    def emitted() -> bool:
        pending = next((r for r in reversed(reported) if isinstance(r, Pending)), None)
        if not isinstance(pending, (PipelineApproveWait, PipelineAskWait)):
            return False
        if compiled[0] is None:
            compiled[0] = compile_source(pipeline, options, os.getcwd())
        return bool(getattr(compiled[0].halts[pending.halt], "emit", False))

    return emitted


def _answer_halts(envelope: dict, options: Options, progress, reported: list,
                  checkpoint_ttl: str | None, emitted) -> dict:
    """At a terminal, each halt is shown and asked, and the run resumed with the answer (the
    checkpoint it parked is claimed at once); what the person leaves, and a stage that asked
    to `--emit` its halt, stay waiting."""
    from vm.cli import terminal
    from vm.service.protocol.resuming import resume_js

    def answer(halt: dict, decision) -> dict:
        reported.clear()  # what the resumed run reports replaces what the halt reported
        if progress is not None:
            progress.resume()
        return resume_js(options, decision, token=halt["resumeToken"],
                         checkpoint_ttl=checkpoint_ttl)

    def say(text: str) -> None:
        if progress is not None:
            progress.pause()  # the question has the terminal, even if an event comes late
        sys.stderr.write(text)
        sys.stderr.flush()

    def ask(prompt: str) -> str:
        say(prompt)
        return sys.stdin.readline()

    return terminal.settle(envelope, answer, ask, lambda text: say(text + "\n"),
                           terminal.width_of(sys.stderr), emitted)


def _asker(progress):
    def ask_line(prompt: str) -> str:
        if progress is not None:
            progress.pause()  # the prompt has the line to itself
        try:
            sys.stderr.write(prompt)
            sys.stderr.flush()
            return sys.stdin.readline()
        finally:
            if progress is not None:
                progress.resume()

    return ask_line
