"""The `lobster` command: run, resume, tool, graph, doctor, help, version.

Exit codes: 0 (also needs_approval, needs_input, cancelled), 1 runtime error, 2 parse error.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vm import __version__
from vm.core import js
from vm.service import protocol
from vm.isa.frame import Pending
from vm.engine.outcome import Failed
from vm.service.protocol import Decision, Options, RequestError

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

USAGE = """\
lobster - run tool pipelines as one call, with durable approval and input checkpoints

usage:
  lobster run [--mode tool|human] [--args-json J] [--dry-run] [--timeout T] [--quiet]
              [--events jsonl] [--checkpoint-ttl 7d] (PIPELINE | FILE | --file FILE)
  lobster PIPELINE                       the same as `lobster run PIPELINE`, in human mode
  lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | --cancel)
              [--timeout T] [--events jsonl]
  lobster tool [REQUEST | -]             one tool call: request JSON in, envelope out
  lobster pending [--format json] [--older-than 7d [--cancel]]   checkpoints waiting, in doubt
  lobster cancel --id ID                 end one checkpoint (approval id or state key)
  lobster history ID [--format json]     one checkpoint's record: halted, claimed, outcome
  lobster gc [--dry-run]                 remove what no checkpoint needs
  lobster key list|rotate                the signing key set: list it, or add a new key
  lobster migrate --to NEW.lobster (--id ID | --program HASH) [--dry-run] [--accept ID]
                                         move paused runs onto a reviewed new version
  lobster mcp                            serve run and resume as MCP tools over stdio
  lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]
  lobster help [COMMAND]                 this text, `run`/`resume` in full, or a pipeline
                                         command's help
  lobster doctor                         check that this installation runs pipelines
  lobster completion bash|zsh            a shell completion script (source it)
  lobster version

examples:
  lobster run --mode tool "exec --json --shell 'echo [1,2,3]' | head --n 2"
  lobster "exec --json --shell 'inbox list --json' | approve --prompt 'Apply?'"
  lobster resume --token <resumeToken> --approve yes

environment: LOBSTER_STATE_DIR (default ~/.lobster/state), LOBSTER_SHELL (default /bin/sh),
LOBSTER_MAX_OUTPUT_BYTES (cap on each child's output).
pipeline commands: run `lobster help COMMAND`, or the pipeline `commands.list`.
"""

_SAFE = re.compile(r"^[A-Za-z0-9_\-./:=@,+%]+$")


def _print_json(value) -> None:
    sys.stdout.write(js.json_pretty(value) + "\n")


def _quote(token: str) -> str:
    """Quote one argv token for the pipeline tokenizer (its own `\\'` escape)."""
    if token and _SAFE.match(token):
        return token
    return "'" + token.replace("'", "\\'") + "'"


def _flag(argv: list[str], i: int, name: str) -> tuple[str | None, int]:
    """The value of `--name v` / `--name=v` at argv[i], and the index after it."""
    word = argv[i]
    if word.startswith(f"--{name}="):
        return word.split("=", 1)[1], i + 1
    if i + 1 < len(argv):
        return argv[i + 1], i + 2
    return None, i + 1


# run ----------------------------------------------------------------------------------------
NO_VALUE = "\0"  # a flag given as the last word, without its value
RUN_FLAGS = ("mode", "file", "args-json", "dry-run", "quiet", "progress", "events", "timeout",
             "checkpoint-ttl")
RUN_SWITCHES = ("dry-run", "quiet", "progress")
MODES = ("tool", "human")


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
        value, i = _flag(argv, i, name)
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
    return (protocol.is_workflow_path(word, os.getcwd())
            or (word.lower().endswith((".lbc", ".pipeline")) and os.path.isfile(word)))


def cmd_run(argv: list[str], frontend: Frontend | None = None) -> int:
    ns = parse_run(argv)
    ns.mode = "human" if ns.mode is None else ns.mode
    if ns.mode not in MODES:
        return _usage_error(RequestError(f"run --mode must be tool or human (got "
                                         f"{_shown(ns.mode)})", code="E020"))
    mode, file, args_json, dry_run, rest = ns.mode, ns.file, ns.args_json, ns.dry_run, ns.rest
    try:
        timeout_ms = _timeout(ns.timeout, "run")
        # progress lines only on a terminal, or when asked for (SPEC 9.19): on a pipe,
        # human-mode stderr is the original's
        shown = ns.progress or _is_terminal(sys.stderr)
        on_event, progress = _listener(ns.events, "run", mode == "human" and not ns.quiet
                                       and shown)
    except RequestError as exc:
        return _print_json(exc.envelope) or 2 if mode == "tool" else _usage_error(exc)
    workflow = file is not None
    program = None
    if file is not None:
        problem = _file_problem(file)
        if problem is not None:
            return _fail(mode, RequestError(problem, code="E005"))
        pipeline = file
    elif len(rest) == 1:
        pipeline = rest[0]
        try:
            loaded = _program_file(pipeline)
        except RequestError as exc:
            return _print_json(exc.envelope) or 2 if mode == "tool" else _usage_error(exc)
        if isinstance(loaded, str):
            pipeline = loaded  # a .pipeline file's text
        elif loaded is not None:
            program, workflow = loaded
    else:
        pipeline = " ".join(_quote(word) for word in rest)
    if not pipeline.strip() and file is None:
        return _fail(mode, RequestError("Empty pipeline", code="E101"))
    rendered: list[str] = []
    reported: list = []
    options = Options(mode=mode, write=rendered.append, stdin_is_tty=sys.stdin.isatty(),
                      ask_line=_asker(progress), log=sys.stderr.write, report=reported.append,
                      frontend=frontend, timeout_ms=timeout_ms, on_event=on_event)
    if dry_run:
        return _dry_run(pipeline, options, workflow, args_json)
    try:
        envelope = protocol.run(pipeline, options, args_json=args_json, file=workflow,
                                program=program, checkpoint_ttl=ns.checkpoint_ttl)
    finally:
        if progress is not None:
            progress.close()
    if mode == "tool":
        _print_json(envelope)
        return protocol.exit_code(envelope)
    if not envelope["ok"]:
        return _human_error(envelope, _rendered(options, reported, pipeline, workflow))
    sys.stdout.write("".join(rendered))
    is_workflow = workflow or protocol.is_workflow_path(pipeline, os.getcwd())
    if envelope["status"] == "ok":
        if not rendered and (envelope["output"] or not is_workflow):
            _print_json(envelope["output"])
    else:
        if is_workflow:
            _print_json({k: envelope[k] for k in ("status", "output", "requiresApproval",
                                                  "requiresInput")})
        elif not rendered:  # the request item, as the original prints it (SPEC 9.13)
            _print_json([_request_item(envelope, reported)])
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


def _usage_error(exc: RequestError) -> int:
    """A refused command line, in human mode: one `lobster: error[CODE]: message` line."""
    error = exc.envelope["error"]
    sys.stderr.write(f"lobster: error[{error['code']}]: {error['message']}\n")
    return 2


def _shown(value: str | None) -> str:
    return "nothing" if value is None or value == NO_VALUE else repr(value)


def _timeout(text: str | None, command: str) -> int | None:
    """`--timeout 30000` (ms) or `--timeout 30s` (a duration) -> ms, within
    bounds.TIMEOUT_MS; None when not given."""
    if text is None:
        return None
    from vm.core import bounds

    try:
        return bounds.TIMEOUT_MS.parse(text, f"{command} --timeout")
    except bounds.BoundError as exc:
        message = exc.message if exc.kind == "range" else (
            f"{command} --timeout must be a number of milliseconds or a duration such as 30s "
            f"(got {_shown(text if len(text) <= 64 else text[:24] + '...')})")
        raise RequestError(message, code="E021") from None


_EVENT_WRITERS: list = []  # this process's `--events jsonl` callbacks, drained before exit
EXIT_DRAIN_S = 60.0  # after the envelope, how long the process waits to write queued events


def _write_fd_2(text: str) -> None:
    """Events go straight to fd 2, not through sys.stderr's buffer: a writer blocked on a full
    pipe holds no lock that the rest of the process (or its exit) needs."""
    data = text.encode("utf-8", "backslashreplace")
    while data:
        data = data[os.write(2, data):]


def _finish_events() -> None:
    """The envelope is written: close stdout, so a reader that reads all of stdout before
    stderr gets to the events, then write every event still queued (at most EXIT_DRAIN_S)."""
    if not _EVENT_WRITERS:
        return
    from vm.engine.events import drain

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    for writer in _EVENT_WRITERS:
        drain(writer, EXIT_DRAIN_S)


def _standard_fds() -> None:
    """A stdin, stdout or stderr that was closed (`2>&-`) becomes the null device: nothing the
    process opens lands on fds 0-2 (a child would inherit it), and writing there is no error."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          closefd=False)


def _listener(events: str | None, command: str, human: bool):
    """The event callback a command's flags ask for: `--events jsonl` (JSON lines on stderr),
    else the progress display in human mode; and the display, to clear it at the end."""
    if events is not None:
        if events.strip().lower() != "jsonl":
            raise RequestError(f"{command} --events must be jsonl (got {_shown(events)})",
                               code="E022")
        from vm.engine.events import jsonl_writer

        writer = jsonl_writer(_write_fd_2)
        _EVENT_WRITERS.append(writer)
        return writer, None
    if not human:
        return None, None
    from vm.engine.events import Progress

    progress = Progress(sys.stderr, _is_terminal(sys.stderr))
    return progress, progress


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


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
            raise RequestError(f"cannot read {path}: {exc}", code="E023") from None
    from vm.isa import codec

    try:
        with open(path, "rb") as fh:
            program = codec.load_program(fh.read())
    except OSError as exc:
        raise RequestError(f"cannot read {path}: {exc.strerror}", code="E023") from None
    except codec.LoadError as exc:
        raise RequestError(f"{path} is not a compiled Lobster program: {exc}",
                           code="E023") from None
    source = program.header.source_name.lower()
    return program, source.endswith(protocol.WORKFLOW_EXTENSIONS)


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
            f"{shlex.quote(js.json_compact(answer))}")


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


def _file_problem(path: str) -> str | None:
    """Why `--file PATH` names no workflow file, in the reference's words: the path is looked
    up first (with the OS's text, as Node words it), then its kind, then its extension."""
    full = os.path.abspath(path)
    if not os.path.exists(full):
        return f"ENOENT: no such file or directory, stat '{full}'"
    if not os.path.isfile(full):
        return "Workflow path is not a file"
    if not full.lower().endswith(protocol.WORKFLOW_EXTENSIONS):
        return "Workflow file must end in .lobster, .yaml, .yml, or .json"
    return None


def _dry_run(pipeline: str, options: Options, workflow: bool = False,
             args_json: str | None = None) -> int:
    """Check the pipeline (or workflow file) and print its plan to stderr; run nothing."""
    mode = options.mode
    try:
        compiler = protocol.compiler(options.frontend)
        try:
            if workflow or protocol.is_workflow_path(pipeline, os.getcwd()):
                args = protocol.parse_args_json(args_json)
                plan = compiler.plan_workflow(os.path.join(os.getcwd(), pipeline.strip()), args)
            else:
                plan = compiler.plan_pipeline(pipeline)
        except compiler.CompileError as exc:
            raise RequestError(**compiler.error_fields(exc)) from None
    except RequestError as exc:
        return _fail(mode, exc)
    sys.stderr.write(plan)
    if mode == "tool":
        _print_json(protocol.ok_envelope("ok", []))
    return 0


def _rendered(options: Options, reported: list, pipeline: str, workflow: bool) -> str | None:
    """The human rendering of the compile error or runtime trap a run reported: the same
    `file:line:col: error[CODE]: message`, source line and caret for both."""
    if not reported:
        return None
    problem = reported[0]
    if not isinstance(problem, Failed):
        return protocol.compiler(options.frontend).render_error(problem)
    from vm.core.source import Source, render_trap

    if workflow or protocol.is_workflow_path(pipeline, os.getcwd()):
        main = os.path.join(os.getcwd(), pipeline.strip())
        return render_trap(problem, base_dir=os.path.dirname(os.path.realpath(main)))
    return render_trap(problem, source=Source("<pipeline>", pipeline))


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


def _fail(mode: str, exc: RequestError) -> int:
    if mode == "tool":
        _print_json(exc.envelope)
        return protocol.exit_code(exc.envelope)
    return _human_error(exc.envelope)


def _human_error(envelope: dict, rendered: str | None = None) -> int:
    """`Error: <msg>` (or `Parse error: <msg>`) as the reference prints it, then where: every
    diagnostic with its source line, caret and hint (`rendered` by the compiler), or the
    runtime location."""
    error = envelope["error"]
    label = "Parse error" if error["type"] == "parse_error" else "Error"
    if error["message"].startswith("run --args-json "):
        lines = [error["message"]]  # the reference prints its own usage errors bare
    else:
        lines = [f"{label}: {error['message']}"]
    if rendered is not None:
        lines.append(rendered)
    elif error.get("location"):
        loc = error["location"]
        lines.append(f"  at {loc['file']}:{loc['line']}:{loc['column']}")
    sys.stderr.write("\n".join(lines) + "\n")
    return protocol.exit_code(envelope)


# resume -------------------------------------------------------------------------------------
def cmd_resume(argv: list[str]) -> int:
    values: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word[2:].split("=", 1)[0] if word.startswith("--") else ""
        if name in ("token", "id", "approve", "decision", "response-json", "timeout", "events",
                    "checkpoint-ttl"):
            values[name], i = _flag(argv, i, name)
            if values[name] is None and name in ("timeout", "events"):
                values[name] = NO_VALUE
        elif name == "cancel":
            if "=" in word:
                values["cancel"], i = word.split("=", 1)[1], i + 1
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                values["cancel"], i = argv[i + 1], i + 2
            else:
                values["cancel"], i = "true", i + 1
        else:
            i += 1
    try:
        envelope = _resume(values)
    except RequestError as exc:
        envelope = exc.envelope
    _print_json(envelope)
    return protocol.exit_code(envelope)


def _resume(values: dict) -> dict:
    token, approval_id = values.get("token"), values.get("id")
    if not token and not approval_id:
        raise RequestError("resume requires --token or --id")
    approve = values.get("approve", values.get("decision")) or None  # '' is no decision
    chosen = [k for k in ("approve", "response-json", "cancel")
              if (values.get(k) if k != "approve" else approve) is not None]
    if len(chosen) > 1:
        raise RequestError("resume accepts only one of --approve, --response-json, or --cancel")
    if not chosen:
        raise RequestError("resume requires --approve yes|no, --response-json, or --cancel")
    if approve is not None:
        answer = approve.strip().lower()
        if answer not in ("yes", "y", "no", "n", "true", "false"):
            raise RequestError("resume --approve must be yes or no")
        decision = Decision(approve=answer in ("yes", "y", "true"))
    elif values.get("response-json") is not None:
        decision = Decision(response=protocol.parse_response_json(
            values["response-json"], "resume --response-json"), has_response=True)
    else:
        cancel = values["cancel"].strip().lower()
        if cancel not in ("true", "false"):
            raise RequestError("resume --cancel must be true or false")
        if cancel == "false":
            raise RequestError("resume requires --approve yes|no, --response-json, or --cancel")
        decision = Decision(cancel=True)
    on_event, _ = _listener(values.get("events"), "resume", human=False)
    options = Options(mode="tool", log=sys.stderr.write,
                      timeout_ms=_timeout(values.get("timeout"), "resume"), on_event=on_event)
    ttl = values.get("checkpoint-ttl")
    if approval_id:
        return protocol.resume(options, decision, approval_id=approval_id, checkpoint_ttl=ttl)
    return protocol.resume(options, decision, token=token, checkpoint_ttl=ttl)


RUN_HELP = """\
usage: lobster run [options] (PIPELINE | FILE | --file FILE)
       lobster PIPELINE

Run a pipeline, or a workflow file, to its end or to its first approval or input gate.

what to run:
  PIPELINE           pipeline text, one argument ('exec --json --shell "ls" | head --n 2') or
                     several words joined
  FILE               a workflow file (.lobster, .yaml, .yml, .json), a compiled program
                     (.lbc, from `lobsterc compile`) or a file of pipeline text (.pipeline)
  --file FILE        a workflow file, whatever its name looks like

options (before the pipeline, or after a single FILE or quoted PIPELINE):
  --mode human|tool  human (default): the output as text, progress on a terminal;
                     tool: one JSON envelope on stdout
  --args-json J      a JSON object of the workflow's args (over its defaults)
  --dry-run          print what would run, and run nothing
  --timeout T        stop the run after T: milliseconds (30000) or a duration (30s, 2m)
  --quiet            human mode: no resume hint on stderr
  --progress         human mode: progress lines on stderr even when it is not a terminal
  --events jsonl     every run event as one JSON line on stderr (either mode)
  --checkpoint-ttl D a checkpoint this run parks expires after D (30m, 12h, 7d)

At a gate the run stops and saves its state: human mode prints the `lobster resume`
command that continues it. Exit codes: 0 (also when waiting at a gate), 1 runtime error,
2 bad input.
"""

RESUME_HELP = """\
usage: lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | --cancel)
                      [--timeout T] [--events jsonl] [--checkpoint-ttl D]

Continue a run that stopped at a gate, and print its envelope (as `--mode tool` does).

which run:
  --token T          the resumeToken of the envelope that stopped
  --id ID            the approvalId of an approval request (8 hex digits), instead
the answer (exactly one):
  --approve yes|no   the decision on an approval request (also y/n, true/false); `no`
                     ends the run, cancelled
  --response-json J  the answer to an input request: JSON valid under its responseSchema
  --cancel           end the run without answering
options:
  --timeout T        stop the resumed run after T: milliseconds or a duration (30s)
  --events jsonl     every run event as one JSON line on stderr
  --checkpoint-ttl D the next checkpoint of the resumed run expires after D

A wrong answer is refused and the checkpoint stays; a token works once.
"""

SUBCOMMAND_HELP = {"run": RUN_HELP, "resume": RESUME_HELP}


# completion ---------------------------------------------------------------------------------
COMMANDS = ("run", "resume", "tool", "pending", "cancel", "history", "gc", "key", "migrate",
            "mcp", "graph", "help", "doctor", "completion", "version")
COMMAND_FLAGS = {
    "run": "--mode --args-json --dry-run --file --timeout --quiet --progress --events "
           "--checkpoint-ttl "
           "--help",
    "resume": "--token --id --approve --response-json --cancel --timeout --events "
              "--checkpoint-ttl --help",
    "pending": "--format --older-than --cancel --help",
    "cancel": "--id --format --help",
    "history": "--format --help",
    "gc": "--dry-run --format --grace --help",
    "key": "list rotate --format --help",
    "graph": "--file --format --args-json --help",
}
FLAG_VALUES = {"--mode": "tool human", "--approve": "yes no", "--events": "jsonl",
               "--format": "json text mermaid dot ascii"}

BASH_COMPLETION = """\
# lobster completion for bash: source <(lobster completion bash)
_lobster() {
    local cur prev sub words
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    sub="${COMP_WORDS[1]}"
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W "@COMMANDS@" -- "$cur") )
        return 0
    fi
    case "$prev" in
@VALUES@
        --file) COMPREPLY=( $(compgen -f -- "$cur") ); return 0 ;;
    esac
    case "$sub" in
        help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=( $(compgen -W "run resume" -- "$cur") ); return 0 ;;
        completion) COMPREPLY=( $(compgen -W "bash zsh" -- "$cur") ); return 0 ;;
@FLAGS@
        *) words="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$words" -- "$cur") )
    else
        COMPREPLY=( $(compgen -f -- "$cur") )
    fi
    return 0
}
complete -o filenames -F _lobster lobster
"""

ZSH_COMPLETION = """\
#compdef lobster
# lobster completion for zsh: source <(lobster completion zsh), or save as _lobster in $fpath
_lobster() {
    local sub="${words[2]}" prev="${words[CURRENT-1]}"
    if (( CURRENT == 2 )); then
        compadd -- @COMMANDS@
        return
    fi
    case "$prev" in
@VALUES@
        --file) _files; return ;;
    esac
    case "$sub" in
        help) (( CURRENT == 3 )) && compadd -- run resume; return ;;
        completion) compadd -- bash zsh; return ;;
@FLAGS@
    esac
    _files
}
if [[ "$funcstack[1]" == _lobster ]]; then _lobster "$@"; else compdef _lobster lobster; fi
"""


def completion_script(shell: str) -> str:
    """The completion script for `shell` (bash or zsh), made from the tables above."""
    if shell == "bash":
        values = "\n".join(f"        {flag}) COMPREPLY=( $(compgen -W \"{words}\" -- \"$cur\") );"
                           f" return 0 ;;" for flag, words in FLAG_VALUES.items())
        flags = "\n".join(f"        {sub}) words=\"{words}\" ;;"
                          for sub, words in COMMAND_FLAGS.items())
        template = BASH_COMPLETION
    else:
        values = "\n".join(f"        {flag}) compadd -- {words}; return ;;"
                           for flag, words in FLAG_VALUES.items())
        flags = "\n".join(f"        {sub}) [[ $PREFIX == -* ]] && {{ compadd -- {words}; "
                          f"return; }} ;;" for sub, words in COMMAND_FLAGS.items())
        template = ZSH_COMPLETION
    return (template.replace("@COMMANDS@", " ".join(COMMANDS)).replace("@VALUES@", values)
            .replace("@FLAGS@", flags))


def cmd_completion(argv: list[str]) -> int:
    shell = argv[0] if len(argv) == 1 else None
    if shell not in ("bash", "zsh"):
        return _usage_error(RequestError(f"completion takes bash or zsh (got "
                                         f"{_shown(' '.join(argv) if argv else None)})",
                                         code="E024"))
    sys.stdout.write(completion_script(shell))
    return 0


# graph --------------------------------------------------------------------------------------
GRAPH_USAGE = """\
usage: lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]

Print a workflow file's steps and the data flow between them (nothing is run).
  --format     mermaid (default), dot, or ascii
  --args-json  a JSON object of args for ${arg} in the labels, over the file's defaults
"""


def cmd_graph(argv: list[str], frontend: Frontend | None = None) -> int:
    """`lobster graph`: usage errors exit 2 with the bare message, load errors `Error: ...`
    exit 1."""
    path, fmt, args_json = None, "mermaid", None
    i = 0
    try:
        while i < len(argv):
            word = argv[i]
            name = word[2:].split("=", 1)[0] if word.startswith("--") else None
            if word in ("-h", "--help"):
                sys.stdout.write(GRAPH_USAGE)
                return 0
            if name in ("file", "format", "args-json"):
                value, i = _flag(argv, i, name)
                if value is None and name == "file":
                    raise RequestError("graph requires a workflow file path (use --file <path>)")
                if value is None:
                    raise RequestError(f"graph --{name} requires a value")
                if name == "file":
                    path = value
                elif name == "format":
                    fmt = value
                else:
                    args_json = value
            elif name is not None:
                raise RequestError(f"graph does not take --{name}")
            elif path is None:
                path, i = word, i + 1
            else:
                raise RequestError("graph accepts one workflow file path")
        if not path:
            raise RequestError("graph requires a workflow file path (use --file <path>)")
        compiler = protocol.compiler(frontend)
        formats = compiler.graph_formats()
        if fmt not in formats:
            raise RequestError(f"graph --format must be one of: {', '.join(formats)}")
        args = protocol.parse_args_json(args_json, "graph")
    except RequestError as exc:
        sys.stderr.write(exc.envelope["error"]["message"] + "\n")
        return 2
    problem = _file_problem(path)  # missing, then not a file, then the extension
    if problem is not None:
        sys.stderr.write(f"Error: {problem}\n")
        return 1
    try:
        text = compiler.graph(path, fmt, args)
    except compiler.CompileError as exc:
        sys.stderr.write(f"Error: {compiler.error_fields(exc)['message']}\n")
        return 1
    sys.stdout.write(text)
    return 0


# tool, doctor, help, version ----------------------------------------------------------------
def cmd_tool(argv: list[str], frontend: Frontend | None = None) -> int:
    """One request: at most MAX_REQUEST_BYTES of JSON text, nested at most MAX_JSON_DEPTH."""
    limit = protocol.MAX_REQUEST_BYTES
    if argv and argv[0] != "-":
        text = argv[0]
        oversize = len(text.encode("utf-8", "surrogateescape")) > limit
    else:
        data = sys.stdin.buffer.read(limit + 1)
        oversize = len(data) > limit
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:  # refused, never replaced: U+FFFD is not what was sent
            text = None
            not_utf8 = protocol.error_envelope(
                "parse_error", f"tool request is not UTF-8 text (invalid byte at offset "
                f"{exc.start})", "E009")
    envelope = None
    if oversize:
        envelope = protocol.error_envelope(
            "parse_error", f"tool request is over the limit of {limit} bytes", "E006")
    elif text is None:
        envelope = not_utf8
    else:
        try:
            request = js.json_loads(text)
        except js.JSONTooDeep:
            envelope = protocol.error_envelope(
                "parse_error", f"tool request is nested deeper than {js.MAX_JSON_DEPTH} levels",
                "E007")
        except ValueError:
            envelope = protocol.error_envelope("parse_error", "tool request must be valid JSON",
                                               "E002")
    if envelope is None:
        envelope = protocol.handle(request, Options(mode="tool", frontend=frontend))
    _print_json(envelope)
    return protocol.exit_code(envelope)


def cmd_doctor(argv: list[str], frontend: Frontend | None = None) -> int:
    envelope = protocol.run("exec --json --shell 'echo [1]'",
                            Options(mode="tool", frontend=frontend))
    problem = protocol.store_problem(Options(mode="tool", frontend=frontend))
    if problem is not None:
        envelope = protocol.error_envelope("runtime_error", problem, "T450")
    if not envelope.get("ok") or envelope.get("output") != [1]:
        message = envelope.get("error", {}).get("message", "unexpected output")
        _print_json(protocol.error_envelope("doctor_error", message, "T499"))
        return 1
    from vm.cli.admin import checkpoint_note

    sys.stderr.write(checkpoint_note(Options(mode="tool", frontend=frontend)))
    item = {"toolMode": True, "protocolVersion": protocol.PROTOCOL_VERSION, "version": __version__}
    if argv:
        item["notes"] = list(argv)
    _print_json(protocol.ok_envelope("ok", [item]))
    return 0


def cmd_help(argv: list[str]) -> int:
    """`lobster help [COMMAND]`: our usage text, or a command's help made from its signature
    (the texts are ours; the original's differ in wording, see README)."""
    if not argv:
        sys.stdout.write(USAGE)
        return 0
    if argv[0] in SUBCOMMAND_HELP:
        sys.stdout.write(SUBCOMMAND_HELP[argv[0]])
        return 0
    from vm.host.commands import lookup

    cmd = lookup(argv[0])
    if cmd is None:
        sys.stderr.write(f"Unknown command: {argv[0]}\n")
        return 2
    lines = [f"{cmd.name} — {cmd.summary}", "",
             f"usage: {cmd.name}" + "".join(f" [--{f.name}{'' if f.kind == 'bool' else ' V'}]"
                                            for f in cmd.flags)
             + (f" {cmd.positionals}" if cmd.positionals else "")]
    for f in cmd.flags:
        alias = f" (also --{', --'.join(f.aliases)})" if f.aliases else ""
        lines.append(f"  --{f.name:<20} {f.help}{alias}")
    if cmd.aliases:
        lines.append(f"aliases: {', '.join(cmd.aliases)}")
    lines.append(f"side effects: {cmd.effects}")
    for example in cmd.examples:
        lines.append(f"example: {example}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv: Sequence[str] | None = None, frontend: Frontend | None = None) -> int:
    """`frontend` is the compiler (lobsterc's `lobster` script passes itself); without one,
    the installed compiler is looked up when a command first needs to compile. An exception
    nothing else caught is a bug: one line (T498) and exit 1, never a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    _standard_fds()
    _install_signal_handlers()
    try:
        try:
            return _dispatch(args, frontend)
        except BrokenPipeError:
            raise
        except Exception as exc:  # noqa: BLE001 - the last resort
            envelope = protocol.internal_error(exc)
            if _tool_mode(args):
                _print_json(envelope)
            else:
                sys.stderr.write(f"lobster: error[T498]: {envelope['error']['message']}\n")
            return 1
        finally:
            _finish_events()
    except BrokenPipeError:  # the reader went away (`| head -1`): nothing more to say to it
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        return 1


def _tool_mode(args: list[str]) -> bool:
    """Whether this command answers with envelopes on stdout."""
    head = args[0] if args else ""
    if head in ("tool", "resume", "doctor"):
        return True
    return "--mode=tool" in args or any(a == "--mode" and b == "tool"
                                        for a, b in zip(args, args[1:]))


def _dispatch(args: list[str], frontend: Frontend | None) -> int:
    if not args or args[0] in ("-h", "--help"):
        return cmd_help([])
    head, rest = args[0], args[1:]
    if head in ("version", "--version", "-v"):
        sys.stdout.write(__version__ + "\n")
        return 0
    if head == "help":
        return cmd_help(rest)
    if head == "graph":
        return cmd_graph(rest, frontend)
    if head == "completion":
        return cmd_completion(rest)
    if head in ("pending", "cancel", "history", "gc", "key"):
        from vm.cli import admin as cli_admin

        return getattr(cli_admin, f"cmd_{head}")(rest)
    if head == "migrate":  # paused runs onto a reviewed new version (vm/service/migrate.py)
        from vm.service.migrate import cmd_migrate

        return cmd_migrate(rest, frontend)
    if "-h" in rest or "--help" in rest:
        return cmd_help([head] if head in SUBCOMMAND_HELP else [])
    if head == "resume":
        return cmd_resume(rest)
    if head == "mcp":
        from vm.cli.mcp import main as serve_mcp
        return serve_mcp(rest, frontend)
    handlers = {"run": cmd_run, "tool": cmd_tool, "doctor": cmd_doctor}
    if head in handlers:
        return handlers[head](rest, frontend)
    return cmd_run(args, frontend)


def _install_signal_handlers() -> None:
    """SIGINT, SIGTERM, SIGHUP: kill every child's process group, leave every claim this process
    holds in doubt with the signal as its reason, say so, exit 128+N. State writes are atomic,
    so a checkpoint is either whole or absent."""

    def stop(signum, _frame):
        from vm.host.children import defer_while_spawning, kill_all, wait_for_spawns
        from vm.host.store.lifecycle import abandon_all

        if defer_while_spawning(lambda: stop(signum, None)):
            return  # this thread was starting a child: stop once it can be killed
        kill_all()
        wait_for_spawns()  # a child another thread was starting: kill it too
        kill_all()
        abandon_all(f"the resume was stopped by {signal.Signals(signum).name}")
        sys.stderr.write(f"Received {signal.Signals(signum).name}\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
