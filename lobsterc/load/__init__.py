"""Workflow file text -> a positioned Document (YAML 1.2 or JSON; one module per format). Only
unreadable files and syntax errors are refused here: what the data means is checked later."""

from __future__ import annotations

import os

from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.load.document import MAX_WORKFLOW_BYTES, Document, OffsetSpans, Path
from lobsterc.syntax.source import Source
from vm.core.source import file_name
from vm.service.frontend import WORKFLOW_EXTENSIONS as EXTENSIONS

__all__ = ["Document", "OffsetSpans", "Path", "EXTENSIONS", "load_document", "parse_text", "read_text"]


def read_text(path: str) -> str:
    """A workflow file's text. Raises CompileError (E210) with the reference's message when the
    name, the file or its encoding is wrong."""
    if not path.lower().endswith(EXTENSIONS):
        raise file_error("Workflow file must end in .lobster, .yaml, .yml, or .json")
    if not os.path.exists(path):
        raise file_error(f"Workflow file not found: {path}")
    if not os.path.isfile(path):
        raise file_error("Workflow path is not a file")
    try:
        size = os.path.getsize(path)
        if size > MAX_WORKFLOW_BYTES:
            raise CompileError([Diagnostic(
                code="E230", message=f"Workflow file over a limit: {size} bytes, more than "
                                     f"{MAX_WORKFLOW_BYTES}")])
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise file_error(f"Workflow file parse error: not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        raise file_error(f"Workflow file could not be read: {exc.strerror or exc}")


def load_document(path: str) -> Document:
    """Read and parse a workflow file. Raises CompileError (E210) on the first problem."""
    return parse_text(read_text(path), path)


def parse_text(text: str, name: str) -> Document:
    """Parse workflow text; `name` (a path) picks the format: .json is JSON, anything else
    YAML 1.2. Raises CompileError (E210) on a syntax error. Spans name the file in the one
    form of every location (vm.core.source.file_name); the Document keeps `name` as given,
    since messages that follow the original build paths from it."""
    source = Source(file_name(name), text)
    if name.lower().endswith(".json"):
        from lobsterc.load.json_text import parse_json

        data, spans, key_spans = parse_json(source)
    else:
        from lobsterc.load.yaml_text import parse_yaml

        data, spans, key_spans = parse_yaml(source)
    return Document(name, source, data, spans, key_spans)


def file_error(message: str) -> CompileError:
    return CompileError([Diagnostic(code="E210", message=message)])
