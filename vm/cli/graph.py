"""`lobster graph`: a workflow file's steps and the data flow between them, as mermaid, dot
or ascii (nothing is run)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from vm.cli.common import file_problem, refuse
from vm.cli.flags import NO_VALUE, UsageError, parse, render
from vm.cli.specs import GRAPH
from vm.service.protocol.envelope import RequestError
from vm.service.protocol.running import file_notes

if TYPE_CHECKING:
    from vm.service.frontend import Frontend

USAGE = render(GRAPH)

NO_FILE = "graph requires a workflow file path (use --file <path>)"


def cmd_graph(argv: list[str], frontend: Frontend | None = None) -> int:
    """`lobster graph`: usage errors exit 2 with the bare message, load errors `Error: ...`
    exit 1."""
    from vm.service.protocol.running import compiler as find_compiler, parse_args_json

    try:
        values, words = parse(GRAPH, argv)
    except UsageError as exc:
        return refuse(exc)
    try:
        # an empty `--file=` names no file and an empty `--format=` is mermaid, as in the original
        values = {name: value for name, value in values.items() if value != ""}
        for name, value in values.items():
            if value == NO_VALUE:
                raise RequestError(NO_FILE if name == "file" else
                                   f"graph --{name} requires a value")
        paths = [*words, *([values["file"]] if "file" in values else [])]
        if len(paths) > 1:
            raise RequestError("graph accepts one workflow file path")
        path = paths[0] if paths else None
        fmt, args_json = values.get("format", "mermaid"), values.get("args-json")
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
        file_notes(compiler, path, sys.stderr.write, exc)
        sys.stderr.write(f"Error: {compiler.error_fields(exc)['message']}\n")
        return 1
    file_notes(compiler, path, sys.stderr.write)
    sys.stdout.write(text)
    return 0
