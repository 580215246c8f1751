"""The types generator of the front end: a document against the JSON Schema (draft 2020-12) that
the field table makes (lobsterc.load.fields), compiled once to Python closures.

Each schema node compiles to a Check: `ok(value)` says yes or no at the cost of a few calls (a
valid file, which nearly every file is, costs nothing more); `errors(value, path)` yields every
error below a value, in the order and with the words of the jsonschema library, so that what a
user reads is what a JSON Schema tool would say. tests/compiler/test_schema_check.py holds the two
to the same errors on generated documents. Only the keywords the format uses are supported;
`compile_schema` refuses anything else rather than guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from lobsterc.diagnostics import Diagnostic
from lobsterc.load import Document, Path, fields

__all__ = ["type_problems", "compile_schema", "without_refs", "workflow_schema", "json_path"]

# (path of the value, message, the `type` of the schema node that refused it; None: no type)
Error = tuple[Path, str, Any]

# keywords that never change a verdict
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "examples", "default",
                          "$comment"})


def workflow_schema() -> dict:
    """The workflow file format as a JSON Schema (a fresh copy): lobsterc.load.fields makes it."""
    return fields.workflow_schema()


_WORKFLOW: Check | None = None


def type_problems(wf: Document) -> Iterator[Diagnostic]:
    """Every schema error of a document (E210), the first in the file first."""
    global _WORKFLOW
    if _WORKFLOW is None:
        _WORKFLOW = compile_schema(without_refs(workflow_schema()))
    if _WORKFLOW.ok(wf.data):
        return
    errors = list(_WORKFLOW.errors(wf.data, ()))
    errors.sort(key=lambda error: _position(wf, error[0]))  # stable: ties keep their order
    for path, message, _ in errors:
        yield Diagnostic(code="E210", message=f"Workflow file is invalid at {json_path(path)}: "
                                              f"{message}", span=wf.span_of(*path))


def _position(wf: Document, path: Path) -> tuple[int, int, int]:
    span = wf.span_of(*path)
    return span.line, span.col, -len(path)


def json_path(path: Path) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def without_refs(schema: dict) -> dict:
    """The schema with every `#/$defs/...` reference replaced by its definition, which it may do
    as the definitions do not refer to themselves: the checks never resolve a reference."""
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


# ---------------------------------------------------------------------------------------------
# the compiler

class Check:
    """A compiled schema node: `ok` is its verdict, `errors` its errors (none when ok)."""

    __slots__ = ("ok", "errors")

    def __init__(self, ok: Callable[[Any], bool],
                 errors: Callable[[Any, Path], Iterator[Error]]) -> None:
        self.ok = ok
        self.errors = errors

    def __call__(self, instance: Any) -> bool:
        return self.ok(instance)


def _none(instance: Any, path: Path) -> Iterator[Error]:
    return iter(())


_ALWAYS = Check(lambda instance: True, _none)


def compile_schema(schema: Any) -> Check:
    """A Check that gives jsonschema's verdict and errors (draft 2020-12) on any instance. The
    schema must be reference-free and use only the keywords below."""
    if schema is True:
        return _ALWAYS
    if schema is False:
        return Check(lambda instance: False,
                     lambda instance, path: iter([(path, f"False schema does not allow "
                                                         f"{instance!r}", None)]))
    if not isinstance(schema, dict):
        raise ValueError(f"not a schema: {schema!r}")
    unknown = set(schema) - _ANNOTATIONS - set(_KEYWORDS)
    if unknown:
        raise ValueError(f"schema keyword not supported: {', '.join(sorted(unknown))}")
    kind = schema.get("type")
    # in the schema's own key order: the order jsonschema reports a node's errors in
    parts = [_KEYWORDS[key](schema[key], schema) for key in schema if key in _KEYWORDS]
    parts = [part for part in parts if part is not _ALWAYS]
    if not parts:
        return _ALWAYS
    if len(parts) == 1:
        ok = parts[0].ok
    else:
        oks = [part.ok for part in parts]

        def ok(instance: Any) -> bool:
            return all(check(instance) for check in oks)

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        for part in parts:
            for at, message, own in part.errors(instance, path):
                yield at, message, kind if own is _HERE else own

    return Check(ok, errors)


_HERE = object()  # an error of the node being compiled: it takes that node's `type`


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    # 1.0 is an integer to JSON Schema
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or float(v).is_integer()),
}


def _leaf(ok: Callable[[Any], bool], message: Callable[[Any], str]) -> Check:
    """A keyword that looks at the value itself: one error when it refuses it."""

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        if not ok(instance):
            yield path, message(instance), _HERE

    return Check(ok, errors)


def _type(value: Any, schema: dict) -> Check:
    names = value if isinstance(value, list) else [value]
    tests = [_TYPES[name] for name in names]
    shown = ", ".join(repr(name) for name in names)
    ok = tests[0] if len(tests) == 1 else (lambda v: any(test(v) for test in tests))
    return _leaf(ok, lambda v: f"{v!r} is not of type {shown}")


def _enum(value: Any, schema: dict) -> Check:
    members = [(_json_kind(member), member) for member in value]

    def ok(instance: Any) -> bool:
        kind = _json_kind(instance)
        return any(k == kind and _json_equal(member, instance) for k, member in members)

    return _leaf(ok, lambda v: f"{v!r} is not one of {value!r}")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if _is_number(value):
        return "number"
    return type(value).__name__


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON has it: true is not 1, 1 is 1.0, containers compare element-wise."""
    if _json_kind(a) != _json_kind(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return a == b


def _properties(value: dict, schema: dict) -> Check:
    checks = {name: compile_schema(sub) for name, sub in value.items()}
    checks = {name: check for name, check in checks.items() if check is not _ALWAYS}
    if not checks:
        return _ALWAYS

    def ok(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        if len(instance) < len(checks):  # a step sets a few of its many properties
            for name, item in instance.items():
                check = checks.get(name)
                if check is not None and not check.ok(item):
                    return False
            return True
        return all(check.ok(instance[name]) for name, check in checks.items() if name in instance)

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        if isinstance(instance, dict):
            for name, check in checks.items():
                if name in instance:
                    yield from check.errors(instance[name], (*path, name))

    return Check(ok, errors)


def _additional_properties(value: Any, schema: dict) -> Check:
    known = frozenset(schema.get("properties", {}))
    if "patternProperties" in schema:
        raise ValueError("schema keyword not supported: patternProperties")
    check = compile_schema(value)
    if check is _ALWAYS:
        return _ALWAYS

    def ok(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(check.ok(item) for name, item in instance.items() if name not in known)

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        if not isinstance(instance, dict):
            return
        extras = [name for name in instance if name not in known]
        if value is False and extras:
            shown = ", ".join(repr(name) for name in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield path, f"Additional properties are not allowed ({shown} {verb} unexpected)", _HERE
            return
        for name in extras:
            yield from check.errors(instance[name], (*path, name))

    return Check(ok, errors)


def _required(value: list, schema: dict) -> Check:
    names = tuple(value)

    def ok(instance: Any) -> bool:
        return not isinstance(instance, dict) or all(name in instance for name in names)

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        if isinstance(instance, dict):
            for name in names:
                if name not in instance:
                    yield path, f"{name!r} is a required property", _HERE

    return Check(ok, errors)


def _items(value: Any, schema: dict) -> Check:
    check = compile_schema(value)
    if check is _ALWAYS:
        return _ALWAYS

    def ok(instance: Any) -> bool:
        return not isinstance(instance, list) or all(check.ok(item) for item in instance)

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        if isinstance(instance, list):
            for index, item in enumerate(instance):
                yield from check.errors(item, (*path, index))

    return Check(ok, errors)


def _too_short(least: int) -> str:
    return "should be non-empty" if least == 1 else "is too short"


def _min_items(value: int, schema: dict) -> Check:
    return _leaf(lambda v: not isinstance(v, list) or len(v) >= value,
                 lambda v: f"{v!r} {_too_short(value)}")


def _min_length(value: int, schema: dict) -> Check:
    return _leaf(lambda v: not isinstance(v, str) or len(v) >= value,
                 lambda v: f"{v!r} {_too_short(value)}")


def _minimum(value: float, schema: dict) -> Check:
    return _leaf(lambda v: not (_is_number(v) and v < value),  # NaN passes, as there
                 lambda v: f"{v!r} is less than the minimum of {value!r}")


def _maximum(value: float, schema: dict) -> Check:
    return _leaf(lambda v: not (_is_number(v) and v > value),
                 lambda v: f"{v!r} is greater than the maximum of {value!r}")


def _one_of(value: list, schema: dict) -> Check:
    checks = [compile_schema(sub) for sub in value]

    def ok(instance: Any) -> bool:
        matched = 0
        for check in checks:
            if check.ok(instance):
                matched += 1
                if matched > 1:
                    return False
        return matched == 1

    def errors(instance: Any, path: Path) -> Iterator[Error]:
        context: list[Error] = []
        valid = [index for index, check in enumerate(checks) if check.ok(instance)]
        for check in checks[:valid[0]] if valid else checks:
            context += check.errors(instance, path)
        if not valid:
            # the types the alternatives wanted, as lobsterc words a oneOf it refuses
            kinds = sorted({str(kind) for _, _, kind in context if kind is not None})
            yield path, (f"{instance!r} must be one of the types {', '.join(kinds)}" if kinds
                         else f"{instance!r} is not valid under any of the given schemas"), _HERE
        elif len(valid) > 1:
            shown = ", ".join(repr(value[index]) for index in (*valid[1:], valid[0]))
            yield path, f"{instance!r} is valid under each of {shown}", _HERE

    return Check(ok, errors)


_KEYWORDS: dict[str, Callable[[Any, dict], Check]] = {
    "type": _type,
    "enum": _enum,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional_properties,
    "items": _items,
    "minItems": _min_items,
    "minLength": _min_length,
    "minimum": _minimum,
    "maximum": _maximum,
    "oneOf": _one_of,
}
