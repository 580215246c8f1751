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

from vm import __version__, js, protocol
from vm.outcome import Failed
from vm.protocol import Decision, Options, RequestError

if TYPE_CHECKING:
    from vm.frontend import Frontend

USAGE = """\
lobster - run tool pipelines as one call, with durable approval and input checkpoints

usage:
  lobster run [--mode tool|human] [--args-json J] [--dry-run] (PIPELINE | FILE | --file FILE)
  lobster PIPELINE                       the same as `lobster run PIPELINE`, in human mode
  lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | --cancel)
  lobster tool [REQUEST | -]             one tool call: request JSON in, envelope out
  lobster pending [--format json] [--older-than 7d [--cancel]]   checkpoints waiting, in doubt
  lobster cancel --id ID                 end one checkpoint (approval id or state key)
  lobster gc [--dry-run]                 remove what no checkpoint needs
  lobster mcp                            serve run and resume as MCP tools over stdio
  lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]
  lobster help [COMMAND]                 this text, or one pipeline command's help
  lobster doctor                         check that this installation runs pipelines
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
def cmd_run(argv: list[str], frontend: Frontend | None = None) -> int:
    mode, file, args_json, dry_run = "human", None, None, False
    rest: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if rest or not word.startswith("--"):
            rest.append(word)
            i += 1
            continue
        name = word[2:].split("=", 1)[0]
        if name == "mode":
            mode, i = _flag(argv, i, "mode")
        elif name == "file":
            file, i = _flag(argv, i, "file")
        elif name == "args-json":
            args_json, i = _flag(argv, i, "args-json")
        elif name == "dry-run":
            dry_run, i = True, i + 1
        else:
            rest.append(word)
            i += 1
    mode = "tool" if mode == "tool" else "human"
    if (not dry_run and file is None and len(rest) == 2 and rest[1] == "--dry-run"
            and protocol.is_workflow_path(rest[0], os.getcwd())):
        dry_run, rest = True, rest[:1]  # `lobster run wf.lobster --dry-run`
    workflow = file is not None
    if file is not None:
        problem = _file_problem(file)
        if problem is not None:
            return _fail(mode, RequestError(problem, code="E005"))
        pipeline = file
    elif len(rest) == 1:
        pipeline = rest[0]
    else:
        pipeline = " ".join(_quote(word) for word in rest)
    if not pipeline.strip() and file is None:
        return _fail(mode, RequestError("Empty pipeline", code="E101"))
    rendered: list[str] = []
    reported: list = []
    options = Options(mode=mode, write=rendered.append, stdin_is_tty=sys.stdin.isatty(),
                      ask_line=_ask_line, log=sys.stderr.write, report=reported.append,
                      frontend=frontend)
    if dry_run:
        return _dry_run(pipeline, options, workflow, args_json)
    envelope = protocol.run(pipeline, options, args_json=args_json, file=workflow)
    if mode == "tool":
        _print_json(envelope)
        return protocol.exit_code(envelope)
    if not envelope["ok"]:
        return _human_error(envelope, _rendered(options, reported, pipeline, workflow))
    sys.stdout.write("".join(rendered))
    if envelope["status"] == "ok":
        is_workflow = workflow or protocol.is_workflow_path(pipeline, os.getcwd())
        if not rendered and (envelope["output"] or not is_workflow):
            _print_json(envelope["output"])
    else:
        _print_json({k: envelope[k] for k in ("status", "output", "requiresApproval",
                                              "requiresInput")})
    return 0


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
    from vm.source import Source, render_trap

    if workflow or protocol.is_workflow_path(pipeline, os.getcwd()):
        main = os.path.join(os.getcwd(), pipeline.strip())
        return render_trap(problem, base_dir=os.path.dirname(os.path.realpath(main)))
    return render_trap(problem, source=Source("<pipeline>", pipeline))


def _ask_line(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline()


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
        if name in ("token", "id", "approve", "decision", "response-json"):
            values[name], i = _flag(argv, i, name)
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
        if answer not in ("yes", "y", "no", "n"):
            raise RequestError("resume --approve must be yes or no")
        decision = Decision(approve=answer in ("yes", "y"))
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
    options = Options(mode="tool", log=sys.stderr.write)
    if approval_id:
        return protocol.resume(options, decision, approval_id=approval_id)
    return protocol.resume(options, decision, token=token)


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
    if not os.path.exists(path):
        sys.stderr.write(f"Error: ENOENT: no such file or directory, stat '{os.path.abspath(path)}'\n")
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
        text = data.decode("utf-8", "replace")
    envelope = None
    if oversize:
        envelope = protocol.error_envelope(
            "parse_error", f"tool request is over the limit of {limit} bytes", "E006")
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
    from vm.commands import lookup

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
    _install_signal_handlers()
    try:
        return _dispatch(args, frontend)
    except Exception as exc:  # noqa: BLE001 - the last resort
        envelope = protocol.internal_error(exc)
        if _tool_mode(args):
            _print_json(envelope)
        else:
            sys.stderr.write(f"lobster: error[T498]: {envelope['error']['message']}\n")
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
    if head in ("pending", "cancel", "gc"):
        from vm import cli_admin

        return getattr(cli_admin, f"cmd_{head}")(rest)
    if "-h" in rest or "--help" in rest:
        return cmd_help([])
    if head == "resume":
        return cmd_resume(rest)
    if head == "mcp":
        from vm.mcp import main as serve_mcp
        return serve_mcp(rest, frontend)
    handlers = {"run": cmd_run, "tool": cmd_tool, "doctor": cmd_doctor}
    if head in handlers:
        return handlers[head](rest, frontend)
    return cmd_run(args, frontend)


def _install_signal_handlers() -> None:
    """SIGINT, SIGTERM, SIGHUP: kill every child's process group, say so, exit 128+N. State
    writes are atomic, so a checkpoint is either whole or absent."""

    def stop(signum, _frame):
        from vm.process import kill_all

        kill_all()
        sys.stderr.write(f"Received {signal.Signals(signum).name}\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
