"""The workflow file loader as the code generator calls it: read, parse and validate a file,
refusing it on the first problem. The jobs live in lobsterc.load (YAML/JSON with positions),
lobsterc.check.validate (the reference's rules) and lobsterc.check.schema (the JSON Schema)."""

from __future__ import annotations

from lobsterc.load import EXTENSIONS, Document, read_text
from lobsterc.check.schema import workflow_schema
from lobsterc.check.validate import is_approval, is_input, step_kind, validate_document, validated

__all__ = [
    "WorkflowFile",
    "load_workflow_file",
    "load_workflow_text",
    "validate_workflow",
    "workflow_schema",
    "step_kind",
    "is_approval",
    "is_input",
    "EXTENSIONS",
]

WorkflowFile = Document
validate_workflow = validate_document


def load_workflow_file(path: str) -> Document:
    """Read, parse and validate a workflow file. Raises CompileError (E210, runtime_error) with
    the reference's message on the first problem."""
    return validated(read_text(path), path)


def load_workflow_text(text: str, name: str) -> Document:
    """Parse and validate workflow text; `name` (a path) picks the format: .json is JSON,
    anything else YAML 1.2."""
    return validated(text, name)
