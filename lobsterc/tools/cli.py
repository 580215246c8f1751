"""The `lobsterc` command: compile, dis (disassemble, or --check against a golden file), lint,
graph (a workflow file as mermaid / dot / ascii), schema (the workflow file JSON Schema), lsp
(the language server).

Exit codes: 0 ok, 1 findings (compile errors, drift), 2 usage error.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from lobsterc.diagnostics import CompileError, render
from lobsterc.syntax.source import Source
from vm import install_hint
from vm.core.source import file_name
from vm.isa import codec
from vm.isa.dis import disassemble
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.isa.program import Program



def compile_target(target: str) -> tuple[Program, str | None]:
    """A .lbc file is loaded; anything else is compiled as pipeline source text."""
    path = Path(target)
    if path.suffix == ".lbc":
        return codec.load_program(path.read_bytes()), None
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in WORKFLOW_EXTENSIONS:
        from lobsterc.generate.workflow import compile_workflow

        return compile_workflow(target), text
    from lobsterc.generate.codegen import compile_pipeline

    return compile_pipeline(text.strip("\n"), path.name, path=target), text.strip("\n")


def _report(exc: CompileError, text: str | None, name: str) -> int:
    for diag in exc.diagnostics:
        source = None
        if text is not None and diag.span is not None and diag.span.source == file_name(name):
            body = text if Path(name).suffix.lower() in WORKFLOW_EXTENSIONS else text.strip("\n")
            source = Source(diag.span.source, body)
        sys.stderr.write(render(diag, source) + "\n")
    return 1


def cmd_compile(ns) -> int:
    try:
        program, _ = compile_target(ns.file)
    except CompileError as exc:
        return _report(exc, _read(ns.file), ns.file)
    out = Path(ns.output or Path(ns.file).with_suffix(".lbc"))
    out.write_bytes(codec.dump_program(program))
    sys.stdout.write(f"{out}  program sha256:{program.hash}\n")
    return 0


def cmd_dis(ns) -> int:
    if ns.file is None or (ns.check and len(ns.check) > 1):
        if ns.file is not None or not ns.check:
            sys.stderr.write("usage: lobsterc dis FILE [--check GOLDEN] | dis --check GOLDEN...\n")
            return 2
        return max([_check_golden(path) for path in ns.check])
    try:
        program, text = compile_target(ns.file)
    except CompileError as exc:
        return _report(exc, _read(ns.file), ns.file)
    listing = disassemble(program, text)
    if ns.check is None:
        sys.stdout.write(listing)
        return 0
    return _diff_golden(ns.check[0], listing, ns.file)


def _diff_golden(check: str, listing: str, name: str) -> int:
    golden = Path(check).read_text(encoding="utf-8") if Path(check).exists() else ""
    if golden == listing:
        return 0
    sys.stdout.writelines(difflib.unified_diff(golden.splitlines(True), listing.splitlines(True),
                                               check, f"{name} (compiled)"))
    return 1


def _check_golden(path: str) -> int:
    """`dis --check X`: a golden `X.lbs` is compared with its source (named in its header,
    in the same directory); a source `X.lobster` with `X.lbs` beside it (none: nothing to do)."""
    if not path.endswith(".lbs"):
        golden = str(Path(path).with_suffix(".lbs"))
        return _check_pair(path, golden) if Path(golden).exists() else 0
    header = Path(path).read_text(encoding="utf-8").splitlines()[1:2]
    if not header or not header[0].startswith("; source "):
        sys.stderr.write(f"lobsterc: {path}: not a disassembly (no '; source' line)\n")
        return 2
    name = header[0][len("; source "):].strip().rsplit(" sha256:", 1)[0].strip()
    return _check_pair(str(Path(path).parent / name), path)


def _check_pair(source: str, golden: str) -> int:
    try:
        program, text = compile_target(source)
    except CompileError as exc:
        return _report(exc, _read(source), source)
    return _diff_golden(golden, disassemble(program, text), source)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def cmd_lint(ns) -> int:
    from lobsterc.tools.lint import run_lint

    if "-" in ns.files:
        return _lint_stdin(ns)
    return run_lint(ns.files, fmt=ns.format, require_approval=ns.require_approval,
                    strict=ns.strict)


STDIN_NAME = "<stdin>"


def _lint_stdin(ns) -> int:
    """`lobsterc lint -`: the text on stdin, linted as a workflow file when it reads as one
    (a YAML or JSON mapping with `steps`) or `--stdin-kind workflow` says so, else as a
    pipeline. Findings name it `<stdin>`; a sub-workflow path in it is found from the
    current directory."""
    import io
    import re

    from lobsterc.tools.lint import run_lint

    if ns.files != ["-"]:
        sys.stderr.write("lobsterc: lint - reads stdin alone: name no other file with it\n")
        return 2
    text = sys.stdin.read()
    kind = ns.stdin_kind or ("workflow" if re.search(r"^\s*[\"']?steps[\"']?\s*:", text, re.M)
                             else "pipeline")
    # a name in the current directory, so a `workflow:` path in it resolves from there
    name = STDIN_NAME + (".lobster" if kind == "workflow" else ".pipeline")
    out, err = io.StringIO(), io.StringIO()
    code = run_lint([name], fmt=ns.format, require_approval=ns.require_approval,
                    strict=ns.strict, out=out, err=err, text=text)
    for stream, buffer in ((sys.stdout, out), (sys.stderr, err)):
        stream.write(buffer.getvalue().replace(name, STDIN_NAME))
    return code


def cmd_graph(ns) -> int:
    """The same text as `lobster graph`; a bad file is reported with its source line."""
    from lobsterc.tools.graph import FORMATS, parse_args_json, render_graph
    from lobsterc.check.problems import load_checked
    if ns.format not in FORMATS:
        sys.stderr.write(f"graph --format must be one of: {', '.join(FORMATS)}\n")
        return 2
    try:
        args = parse_args_json(ns.args_json)
    except ValueError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    try:
        wf = load_checked(ns.file)
    except CompileError as exc:
        return _report(exc, _read(ns.file), ns.file)
    sys.stdout.write(render_graph(wf, ns.format, args))
    return 0


def cmd_schema(ns) -> int:
    import json

    from lobsterc.load.fields import workflow_schema

    sys.stdout.write(json.dumps(workflow_schema(), indent=2, ensure_ascii=False) + "\n")
    return 0


def cmd_diff(ns) -> int:
    """`lobsterc diff`: the safety diff of two versions (lobsterc.tools.diff)."""
    from lobsterc.tools.diff.command import run_diff

    return run_diff(ns.files, compile=compile_target, rev=ns.rev, fmt=ns.format,
                    accept=tuple(ns.accept or ()))


def cmd_lsp(ns) -> int:
    """`lobsterc lsp`: the language server on stdio (lobsterc.tools.lsp; pygls loads only here)."""
    from lobsterc.tools.lsp import main as serve

    return serve(require_approval=ns.require_approval, strict=ns.strict)


def build_parser() -> Parser:
    from vm import __version__

    parser = Parser(
        prog="lobsterc", description="The Lobster compiler: pipeline and workflow sources to "
        "bytecode, its disassembly, lint findings, graphs and the workflow file schema.",
        epilog="`lobsterc help COMMAND` (or `lobsterc COMMAND --help`) describes one command; "
        "`lobsterc completion bash|zsh` prints a completion script. Exit codes: 0 ok, 1 findings "
        "(compile errors, lint findings, golden drift), 2 usage error.")
    # the same form as `lobster --version` (the original's: the version alone)
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    parser.commands = sub.choices  # each command's parser, by name, as it is added
    p = sub.add_parser("compile", help="compile a source to a .lbc program")
    p.add_argument("file")
    p.add_argument("-o", "--output", help="where to write the .lbc (default: beside the source)")
    p.set_defaults(run=cmd_compile)
    p = sub.add_parser("dis", help="print the stable disassembly of a source or .lbc")
    p.add_argument("file", nargs="?")
    p.add_argument("--check", metavar="GOLDEN", nargs="+",
                   help="compare with golden file(s); exit 1 with a unified diff on drift")
    p.set_defaults(run=cmd_dis)
    p = sub.add_parser("lint", help="report every problem of pipeline and workflow files")
    p.add_argument("files", nargs="+", metavar="FILE", help="source files; - reads stdin")
    p.add_argument("--stdin-kind", choices=("pipeline", "workflow"),
                   help="with -: what stdin holds (default: a workflow when it has `steps:`)")
    p.add_argument("--format", default="text", choices=("text", "json", "sarif", "github"),
                   help="sarif: SARIF 2.1.0 for code scanning; github: workflow commands")
    p.add_argument("--require-approval", action="store_true",
                   help="prove every writes_state / network step follows an approval gate")
    p.add_argument("--strict", action="store_true",
                   help="with --require-approval: shell and exec steps need approval too")
    p.set_defaults(run=cmd_lint)
    p = sub.add_parser(
        "diff", help="the safety diff of two versions of a workflow or pipeline",
        description="Compile OLD and NEW (or PATH at two git revisions) and compare the "
        "programs: gates removed or weakened, effects moved before a gate, new effect kinds, "
        "changed args, env, policies and cost limits. Exit 1 when a safety property weakens "
        "and the finding is not accepted (--accept ID, or `x-reviewed: [ID]` in NEW).")
    p.add_argument("files", nargs="+", metavar="FILE", help="OLD NEW, or PATH with --rev")
    p.add_argument("--rev", metavar="A..B", help="compare PATH at git revisions A and B "
                   "(B empty: the working tree)")
    p.add_argument("--format", default="text",
                   choices=("text", "json", "markdown", "sarif", "github"))
    p.add_argument("--accept", metavar="ID", action="append",
                   help="accept a reviewed finding by its id (repeat, or comma-separate)")
    p.set_defaults(run=cmd_diff)
    p = sub.add_parser("graph", help="print a workflow file's graph (as `lobster graph` does)")
    p.add_argument("file")
    p.add_argument("--format", default="mermaid", help="mermaid (default), dot, or ascii")
    p.add_argument("--args-json", metavar="J", help="a JSON object of args for ${arg} in labels")
    p.set_defaults(run=cmd_graph)
    p = sub.add_parser("schema", help="print the workflow file format as a JSON Schema")
    p.set_defaults(run=cmd_schema)
    p = sub.add_parser(
        "lsp", help="run the language server on stdin/stdout (for editors)",
        description="A language server for workflow files and pipelines: lint diagnostics as "
        "you type, quick fixes, completion, hover, go to definition, symbols and rename. Needs "
        "the lsp extra: " + install_hint("lsp") + ".")
    p.add_argument("--require-approval", action="store_true",
                   help="lint with the approval proof, as `lobsterc lint --require-approval`")
    p.add_argument("--strict", action="store_true",
                   help="with --require-approval: shell and exec steps need approval too")
    p.set_defaults(run=cmd_lsp)
    return parser


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that keeps its long options (`flags`) and its commands' parsers
    (`commands`), which `help COMMAND` and the completion script read."""

    def __init__(self, *args, **kwargs) -> None:
        self.flags: list[str] = []
        self.commands: dict[str, Parser] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *names, **kwargs):
        self.flags += [n for n in names
                       if isinstance(n, str) and n.startswith("--") and n != "--help"]
        return super().add_argument(*names, **kwargs)


def _subparsers(parser: Parser) -> dict[str, Parser]:
    return parser.commands


def front_door(args: list[str], parser: Parser) -> int | None:
    """`help [COMMAND]`, `completion bash|zsh` and a mistyped command, answered before
    argparse reads the command line (which knows none of them); None for everything else."""
    commands = _subparsers(parser)
    head = args[0] if args else ""
    if head == "help":
        if len(args) == 1:
            parser.print_help()
            return 0
        if args[1] in commands:
            commands[args[1]].print_help()
            return 0
        return _unknown(args[1], [*commands, "help", "completion"])
    if head == "completion":
        return _completion(args[1:], parser)
    if head and not head.startswith("-") and head not in commands:
        return _unknown(head, [*commands, "help", "completion"])
    return None


def _unknown(word: str, choices: list[str]) -> int:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    sys.stderr.write(f"lobsterc: error: unknown command {word!r}{hint}; `lobsterc --help` "
                     "lists the commands\n")
    return 2


BASH = """\
# lobsterc completion for bash: source <(lobsterc completion bash)
_lobsterc() {
    local cur="${COMP_WORDS[COMP_CWORD]}" sub="${COMP_WORDS[1]}"
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W "@COMMANDS@" -- "$cur") )
        return 0
    fi
    case "$sub" in
@FLAGS@
    esac
}
complete -o default -F _lobsterc lobsterc
"""
ZSH = """\
#compdef lobsterc
# lobsterc completion for zsh: source <(lobsterc completion zsh)
_lobsterc() {
    if (( CURRENT == 2 )); then
        compadd -- @COMMANDS@
        return
    fi
    case "${words[2]}" in
@FLAGS@
    esac
    _files
}
compdef _lobsterc lobsterc
"""


def _completion(args: list[str], parser: Parser) -> int:
    """`lobsterc completion bash|zsh`: a completion script made from the parser itself."""
    if len(args) != 1 or args[0] not in ("bash", "zsh"):
        sys.stderr.write("usage: lobsterc completion bash|zsh\n")
        return 2
    commands = _subparsers(parser)
    words = {name: " ".join(sub.flags) for name, sub in commands.items()}
    if args[0] == "bash":
        flags = "\n".join(f'        {name}) COMPREPLY=( $(compgen -W "{flags}" -- "$cur") ) ;;'
                          for name, flags in words.items() if flags)
        script = BASH
    else:
        flags = "\n".join(f"        {name}) compadd -- {flags} ;;"
                          for name, flags in words.items() if flags)
        script = ZSH
    names = " ".join([*commands, "help", "completion"])
    sys.stdout.write(script.replace("@COMMANDS@", names).replace("@FLAGS@", flags))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    answered = front_door(args, parser)
    if answered is not None:
        return answered
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return ns.run(ns)
    except OSError as exc:
        sys.stderr.write(f"lobsterc: {exc.strerror}: {exc.filename}\n")
        return 2
    except codec.LoadError as exc:
        sys.stderr.write(f"lobsterc: {ns.file}: {exc}\n")
        return 1
    except UnicodeDecodeError as exc:
        name = getattr(ns, "file", None) or " ".join(getattr(ns, "files", None) or [])
        sys.stderr.write(f"lobsterc: error[E009]: {name}: not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start})\n")
        return 1
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug, never a traceback
        from vm.core.codes import internal_error_message

        sys.stderr.write(f"lobsterc: error[T498]: {internal_error_message(exc)}\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
