"""The workflow file format as a JSON Schema (draft 2020-12), and the check of a document
against it: a compiled predicate says yes or no, jsonschema words the first error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from lobsterc.diagnostics import Diagnostic
from lobsterc.load import Document, Path, fields

_schema_cache: dict | None = None
_flat_schema: dict | None = None  # the schema with its references inlined (without_refs)
_validator_cache: Any = None
_schema_predicate: Any = None  # the flat schema as one predicate (lobsterc.check.schema_check)


def workflow_schema() -> dict:
    """The workflow file format as a JSON Schema (draft 2020-12), made from the field table
    (lobsterc.load.fields); `lobsterc schema` prints it, lobsterc/workflow.schema.json holds it."""
    global _schema_cache
    if _schema_cache is None:
        _schema_cache = fields.workflow_schema()
    return json.loads(json.dumps(_schema_cache))


def type_problems(wf: Document) -> Iterator[Diagnostic]:
    """The types generator: the document against the JSON Schema of the field table."""
    problem = schema_diagnostic(wf)
    if problem is not None:
        yield problem


def schema_diagnostic(wf: Document) -> Diagnostic | None:
    global _flat_schema, _validator_cache, _schema_predicate
    if _flat_schema is None:
        _flat_schema = without_refs(workflow_schema())
    if _schema_predicate is None:
        from lobsterc.check.schema_check import compile_schema

        _schema_predicate = compile_schema(_flat_schema)
    if _schema_predicate(wf.data):
        return None
    if _validator_cache is None:  # a file is invalid: jsonschema finds and words the errors
        from jsonschema import Draft202012Validator

        _validator_cache = Draft202012Validator(_flat_schema)
    errors = list(_validator_cache.iter_errors(wf.data))
    if not errors:
        return None
    first = min(errors, key=lambda e: _position(wf, tuple(e.absolute_path)))
    path = tuple(first.absolute_path)
    where = json_path(path)
    message = f"Workflow file is invalid at {where}: {_schema_message(first)}"
    return Diagnostic(code="E210", message=message, span=wf.span_of(*path))


def without_refs(schema: dict) -> dict:
    """The schema with every `#/$defs/...` reference replaced by its definition, which it may do
    as the definitions do not refer to themselves. The validator then never resolves a reference:
    that lookup was half of validating a file. The errors are the same."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            # what may stand beside a reference here are annotations, which do not validate
            if not ref.startswith("#/$defs/") or not set(node) <= {"$ref", "description"}:
                raise ValueError(f"workflow.schema.json: cannot inline {node!r}")
            return inline(defs[ref.removeprefix("#/$defs/")])
        return {key: inline(value) for key, value in node.items() if key != "$defs"}

    return inline(schema)


def _position(wf: Document, path: Path) -> tuple[int, int, int]:
    span = wf.span_of(*path)
    return span.line, span.col, -len(path)


def _schema_message(error: Any) -> str:
    if error.validator == "oneOf" and error.context:
        kinds = sorted({str(sub.schema.get("type")) for sub in error.context if "type" in sub.schema})
        if kinds:
            return f"{error.instance!r} must be one of the types {', '.join(kinds)}"
    return error.message


def json_path(path: Path) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
