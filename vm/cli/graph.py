"""`lobster graph`: a workflow file's steps and the data flow between them, as mermaid, dot
or ascii (nothing is run)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from vm.cli.common import file_problem, flag
from vm.service.protocol.envelope import RequestError

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

USAGE = """\
usage: lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]

Print a workflow file's steps and the data flow between them (nothing is run).
  --format     mermaid (default), dot, or ascii
  --args-json  a JSON object of args for ${arg} in the labels, over the file's defaults
"""

NO_FILE = "graph requires a workflow file path (use --file <path>)"


def cmd_graph(argv: list[str], frontend: Frontend | None = None) -> int:
    """`lobster graph`: usage errors exit 2 with the bare message, load errors `Error: ...`
    exit 1."""
    from vm.service.protocol.running import compiler as find_compiler, parse_args_json

    path, fmt, args_json = None, "mermaid", None
    i = 0
    try:
        while i < len(argv):
            word = argv[i]
            name = word[2:].split("=", 1)[0] if word.startswith("--") else None
            if word in ("-h", "--help"):
                sys.stdout.write(USAGE)
                return 0
            if name in ("file", "format", "args-json"):
                value, i = flag(argv, i, name)
                if value is None and name == "file":
                    raise RequestError(NO_FILE)
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
            raise RequestError(NO_FILE)
        compiler = find_compiler(frontend)
        formats = compiler.graph_formats()
        if fmt not in formats:
            raise RequestError(f"graph --format must be one of: {', '.join(formats)}")
        args = parse_args_json(args_json, "graph")
    except RequestError as exc:
        sys.stderr.write(exc.envelope["error"]["message"] + "\n")
        return 2
    problem = file_problem(path)  # missing, then not a file, then the extension
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
