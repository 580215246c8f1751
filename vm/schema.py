"""The one JSON Schema dialect of input gates (draft-07, as the original's Ajv): schemas are
checked with it when a workflow is compiled and answers are validated with it at resume, with
errors in the reference's (Ajv-style) wording. jsonschema is imported on first use only.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

# Ajv checks `type` first, then the keywords of the value's type, then the generic ones;
# with one error reported, that order decides which error a caller sees.
_KEYWORD_ORDER = [
    "type", "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems",
    "prefixItems", "items", "contains", "maxProperties", "minProperties", "required",
    "dependentRequired", "propertyNames", "additionalProperties", "properties",
    "patternProperties", "enum", "const", "not", "anyOf", "oneOf", "allOf", "if",
]
_RANK = {k: i for i, k in enumerate(_KEYWORD_ORDER)}


DIALECT = "http://json-schema.org/draft-07/schema#"

# What draft-07 reads. Any other key in a schema object is ignored by its validator (a
# `prefixItems` written for 2020-12 constrains nothing), so lint warns about it.
KEYWORDS = frozenset({
    "$schema", "$id", "$ref", "$comment", "title", "description", "default", "readOnly",
    "writeOnly", "examples", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "additionalItems", "items",
    "maxItems", "minItems", "uniqueItems", "contains", "maxProperties", "minProperties",
    "required", "additionalProperties", "definitions", "properties", "patternProperties",
    "dependencies", "propertyNames", "const", "enum", "type", "format", "contentMediaType",
    "contentEncoding", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
})
_ONE_SCHEMA = ("additionalItems", "contains", "additionalProperties", "propertyNames", "if",
               "then", "else", "not")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAPS = ("definitions", "properties", "patternProperties")


def _validator_class():
    from jsonschema import Draft7Validator

    return Draft7Validator


def ignored_keywords(schema: Any, pointer: str = "") -> list[tuple[str, str]]:
    """(JSON pointer of the schema object, keyword) for every key draft-07 does not read."""
    if not isinstance(schema, dict):
        return []
    found = [(pointer or "/", key) for key in schema if key not in KEYWORDS]
    for key in _ONE_SCHEMA:
        found += ignored_keywords(schema.get(key), f"{pointer}/{key}")
    items = schema.get("items")
    if isinstance(items, list):
        for index, sub in enumerate(items):
            found += ignored_keywords(sub, f"{pointer}/items/{index}")
    else:
        found += ignored_keywords(items, f"{pointer}/items")
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for index, sub in enumerate(schema[key]):
                found += ignored_keywords(sub, f"{pointer}/{key}/{index}")
    for key in (*_SCHEMA_MAPS, "dependencies"):
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                found += ignored_keywords(sub, f"{pointer}/{key}/{_escape(name)}")
    return found


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def schema_fault(schema: Any) -> Any:
    """None if `schema` is a valid JSON Schema of the dialect, else the validator's first
    complaint about it (a jsonschema error: `message`, `json_path`, `absolute_path`)."""
    cls = _validator_class()
    meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    fault = next(iter(meta.iter_errors(schema)), None)
    return fault if fault is not None else _unresolved_ref(schema)


class RefFault:
    """A `$ref` that names nothing in its schema: shaped as a jsonschema error."""

    def __init__(self, ref: str, path: tuple) -> None:
        self.message = f"$ref {ref!r} does not resolve (only references inside the schema do)"
        self.absolute_path = path
        self.json_path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _refs(schema: Any, path: tuple = ()):
    if isinstance(schema, dict):
        if isinstance(schema.get("$ref"), str):
            yield schema["$ref"], (*path, "$ref")
        for key, value in schema.items():
            if key not in ("const", "enum", "default", "examples"):
                yield from _refs(value, (*path, key))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from _refs(value, (*path, index))


def _unresolved_ref(schema: Any) -> RefFault | None:
    """The first `$ref` that does not resolve against the schema itself (nothing is fetched:
    a remote reference does not resolve either), else None."""
    refs = list(_refs(schema))
    if not refs:
        return None
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT7

    resolver = Registry().with_resource("", DRAFT7.create_resource(schema)).resolver()
    for ref, path in refs:
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return RefFault(ref, path)
    return None


def schema_error(schema: Any) -> str | None:
    """None if `schema` is a valid JSON Schema, else the validator's complaint."""
    fault = schema_fault(schema)
    return None if fault is None else fault.message


@lru_cache(maxsize=64)
def _validator(schema_text: str):
    return _validator_class()(json.loads(schema_text))


def first_error(schema: Any, value: Any) -> tuple[str, str] | None:
    """(instance path as a JSON pointer, '/' for the root; message) of the error Ajv would
    report first, or None when `value` is valid."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    from referencing.exceptions import Unresolvable

    try:
        errors = list(validator.iter_errors(value))
    except Unresolvable as exc:  # a schema stored before $refs were checked: refused, not a crash
        return "/", f"the response schema cannot be applied: {exc}"
    if not errors:
        return None
    error = min(errors, key=lambda e: (len(e.absolute_path), _RANK.get(e.validator, 99)))
    while error.context and error.validator not in ("anyOf", "oneOf"):
        error = error.context[0]
    pointer = "".join(f"/{p}" for p in error.absolute_path) or "/"
    return pointer, _message(error)


def _message(error) -> str:
    kw, arg = error.validator, error.validator_value
    if kw == "required":
        missing = next((p for p in arg if isinstance(error.instance, dict)
                        and p not in error.instance), arg[0] if arg else "")
        return f"must have required property '{missing}'"
    if kw == "type":
        return "must be " + (",".join(arg) if isinstance(arg, list) else str(arg))
    simple = {
        "minimum": f"must be >= {arg}", "maximum": f"must be <= {arg}",
        "exclusiveMinimum": f"must be > {arg}", "exclusiveMaximum": f"must be < {arg}",
        "multipleOf": f"must be multiple of {arg}",
        "minLength": f"must NOT have fewer than {arg} characters",
        "maxLength": f"must NOT have more than {arg} characters",
        "minItems": f"must NOT have fewer than {arg} items",
        "maxItems": f"must NOT have more than {arg} items",
        "minProperties": f"must NOT have fewer than {arg} properties",
        "maxProperties": f"must NOT have more than {arg} properties",
        "pattern": f'must match pattern "{arg}"', "format": f'must match format "{arg}"',
        "enum": "must be equal to one of the allowed values",
        "const": "must be equal to constant",
        "additionalProperties": "must NOT have additional properties",
        "uniqueItems": "must NOT have duplicate items",
        "not": "must NOT be valid", "anyOf": "must match a schema in anyOf",
        "oneOf": "must match exactly one schema in oneOf",
    }
    return simple.get(kw, error.message)
