"""The one JSON Schema dialect of input gates (draft-07, as the original's Ajv): schemas are
checked with it when a workflow is compiled and answers are validated with it at resume, with
errors in the reference's (Ajv-style) wording. jsonschema is imported on first use only.
"""

from __future__ import annotations

import json
import math
import threading
from functools import lru_cache
from typing import Any

# Ajv's evaluation order: `type` first, then the keywords of no particular type, then those of
# numbers, strings, arrays and objects; errors come out depth first in that order (observed
# against the original with every error reported). `items` is evaluated before `uniqueItems`.
_KEYWORD_ORDER = [
    "type", "$ref", "const", "enum", "not", "anyOf", "oneOf", "allOf", "if", "then", "else",
    "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "items",
    "additionalItems", "uniqueItems", "contains", "maxProperties", "minProperties", "required",
    "dependencies", "propertyNames", "additionalProperties", "properties", "patternProperties",
]
_RANK = {k: i for i, k in enumerate(_KEYWORD_ORDER)}

# Ajv's rule groups of one data type, by the keyword each begins with in _KEYWORD_ORDER
_TYPE_GROUPS = {
    "number": ("maximum", {"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum",
                           "multipleOf", "format"}),
    "string": ("maxLength", {"maxLength", "minLength", "pattern", "format"}),
    "array": ("maxItems", {"maxItems", "minItems", "items", "additionalItems", "uniqueItems",
                           "contains"}),
    "object": ("maxProperties", {"maxProperties", "minProperties", "required", "dependencies",
                                 "propertyNames", "additionalProperties", "properties",
                                 "patternProperties"}),
}


def _type_group(schema: Any) -> str | None:
    """The group whose turn reports `schema`'s type error (by its first keyword), or None when
    Ajv checks the type first: it does unless the schema names one type and has keywords of
    that type's group."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list) and len(kind) == 1:
        kind = kind[0]
    group = _TYPE_GROUPS.get(kind) if isinstance(kind, str) else None
    return group[0] if group is not None and any(k in group[1] for k in schema) else None


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


class SchemaRecursion(Exception):
    """Applying the schema never ends: a `$ref` leads back to its own schema through keywords
    that apply to the same value (`{"$ref": "#", "type": "string"}`). Ajv compiles such a
    schema and overflows its stack on every value; the message is JavaScript's."""


@lru_cache(maxsize=2)
def _validator_class(first: bool = False):
    """draft-07 with its regexes read as Ajv reads them: JavaScript's, `u` mode
    (vm.core.js_regex), in `pattern`, `patternProperties` and what those leave to
    `additionalProperties`; and, as in Ajv, the keywords beside a `$ref` applied too.
    `first`: for the first error only (Ajv's `allErrors: false`, which stops there)."""
    from jsonschema import Draft7Validator, ValidationError, validators

    from vm.core import js_regex

    def pattern(validator, source, instance, schema):
        if validator.is_type(instance, "string") and not js_regex.test(source, instance):
            yield ValidationError(f"{instance!r} does not match {source!r}")

    def pattern_properties(validator, patterns, instance, schema):
        if validator.is_type(instance, "object"):
            for source, subschema in patterns.items():
                for key, value in instance.items():
                    if js_regex.test(source, key):
                        yield from validator.descend(value, subschema, path=key,
                                                     schema_path=source)

    def additional_properties(validator, extra, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        extras = _additional(instance, schema)
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            yield ValidationError(f"additional properties: {', '.join(map(repr, extras))}")

    draft7_ref = Draft7Validator.VALIDATORS["$ref"]
    local = threading.local()  # .applying: (schema, value) of the `$ref`s being applied

    def ref(validator, ref, instance, schema):
        kinds = schema.get("type")
        if first and kinds is not None and _type_group(schema) is None and not any(
                validator.is_type(instance, kind)
                for kind in (kinds if isinstance(kinds, list) else [kinds])):
            return  # Ajv stops at the type error, checked before `$ref` (which may not end)
        if isinstance(ref, str) and ref.endswith("#/"):
            ref = ref[:-1]  # Ajv reads a trailing `#/` as `#`: the whole (sub)schema
        here = (id(schema), id(instance))
        applying = local.__dict__.setdefault("applying", set())
        if here in applying:  # the same `$ref` on the same value again: it never ends
            raise SchemaRecursion("Maximum call stack size exceeded")
        applying.add(here)
        try:
            for error in draft7_ref(validator, ref, instance, schema):
                error.relative_schema_path.appendleft("$ref")  # (jsonschema leaves it out)
                yield error
        finally:
            applying.discard(here)

    def is_integer(checker, instance) -> bool:  # Ajv's `!(x % 1) && !isNaN(x)`: ±Infinity too
        return Draft7Validator.TYPE_CHECKER.is_type(instance, "integer") or (
            isinstance(instance, float) and math.isinf(instance))

    # every keyword beside a `$ref` applies, as in Ajv (draft-07 itself ignores them)
    return validators.create(
        meta_schema=Draft7Validator.META_SCHEMA,
        validators={**Draft7Validator.VALIDATORS, "$ref": ref, "pattern": pattern,
                    "patternProperties": pattern_properties,
                    "additionalProperties": additional_properties},
        type_checker=Draft7Validator.TYPE_CHECKER.redefine("integer", is_integer),
        format_checker=Draft7Validator.FORMAT_CHECKER, id_of=Draft7Validator.ID_OF)


def _additional(instance: dict, schema: dict) -> list:
    """The keys of `instance` that neither `properties` nor `patternProperties` name."""
    from vm.core import js_regex

    named, patterns = schema.get("properties") or {}, schema.get("patternProperties") or {}
    return [k for k in instance if k not in named
            and not any(js_regex.test(p, k) for p in patterns)]


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


def _unescape(part: str) -> str:
    """A step of a `#/...` reference: percent-decoded, then JSON-pointer unescaped."""
    from urllib.parse import unquote

    return unquote(part).replace("~1", "/").replace("~0", "~")


@lru_cache(maxsize=1)
def _meta_validator():
    """draft-07's meta-schema as Ajv holds it: an `enum` has at least one value and no two
    equal ones (Ajv refuses `enum: []` and `enum: [1, 1]` when it compiles the schema)."""
    import copy

    cls = _validator_class()
    meta = copy.deepcopy(cls.META_SCHEMA)
    meta["$id"] = "urn:lobster:ajv-draft-07"  # its `$ref: "#"` then resolves to this copy
    meta["properties"]["enum"] = {**meta["properties"]["enum"], "minItems": 1, "uniqueItems": True}
    checker = copy.copy(cls.FORMAT_CHECKER)  # regexes are Ajv's, checked by _regex_fault
    checker.checkers = {k: v for k, v in checker.checkers.items() if k != "regex"}
    return cls(meta, format_checker=checker)


def schema_fault(schema: Any, keeps_schemas: bool = False) -> Any:
    """None if `schema` is a valid JSON Schema of the dialect, else the validator's first
    complaint about it (a jsonschema error: `message`, `json_path`, `absolute_path`).
    `keeps_schemas`: as llm.invoke's Ajv, which keeps what it compiles, reads references to
    the whole schema (vm.core.schema_compile.reference_fault)."""
    fault = next(iter(_meta_validator().iter_errors(schema)), None)
    try:
        if fault is None and isinstance(schema, dict) and (
                "$ref" in (text := json.dumps(schema)) or "$id" in text):
            from vm.core.schema_compile import reference_fault

            fault = reference_fault(schema, keeps_schemas)
        return fault or _regex_fault(schema, schema)
    except RecursionError:  # a chain of references thousands long: Ajv's compile overflows too
        return RefFault("", (), "Maximum call stack size exceeded")


class RefFault:
    """A `$ref` that names nothing in its schema (or the `message` its compile fails with):
    shaped as a jsonschema error."""

    def __init__(self, ref: str, path: tuple, message: str | None = None) -> None:
        self.message = message or \
            f"$ref {ref!r} does not resolve (only references inside the schema do)"
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


class RegexFault:
    """A regex `new RegExp(p, "u")` refuses, in V8's words (what Ajv's compile throws), or
    one JavaScript reads that ours cannot apply: shaped as a jsonschema error."""

    def __init__(self, message: str, path: tuple) -> None:
        self.message, self.absolute_path, self.json_path = message, path, "$"


# keywords that constrain nothing (a schema of only these is always valid to Ajv)
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default",
                          "readOnly", "writeOnly", "examples", "definitions",
                          "contentMediaType", "contentEncoding"})


def _always_valid(schema: Any) -> bool:
    return schema is True or (isinstance(schema, dict)
                              and all(k in _ANNOTATIONS or k not in KEYWORDS for k in schema))


def _regex_fault(schema: Any, root: Any, path: tuple = (), seen: frozenset = frozenset()):
    """The first regex Ajv would fail to compile, walking the schema as its compile does: in
    evaluation order, `definitions` only through a `$ref`, `then`/`else` only with an `if`,
    `patternProperties` keys only when a pattern's schema or `additionalProperties`
    constrains something. None when every regex compiles."""
    if not isinstance(schema, dict):
        return None
    from vm.core import js_regex

    def compiles(source: str, at: tuple):
        try:
            js_regex.compiled(source)
        except js_regex.JsRegexSyntaxError as exc:
            return RegexFault(str(exc), at)
        return None

    patterns = schema.get("patternProperties")
    patterns = patterns if isinstance(patterns, dict) else {}
    keys_compiled = "additionalProperties" in schema and not _always_valid(
        schema["additionalProperties"]) or not all(map(_always_valid, patterns.values()))
    for key in sorted((k for k in schema if k in _RANK), key=_RANK.__getitem__):
        value, at = schema[key], (*path, key)
        subs: list = []
        if key == "$ref" and isinstance(value, str) and value.startswith("#") \
                and value not in seen:
            pointer = tuple(p.replace("~1", "/").replace("~0", "~")
                            for p in value[1:].split("/")[1:])
            target = _pointer_target(root, pointer)
            subs = [(target, pointer)] if isinstance(target, dict) else []
            seen = seen | {value}
        elif key == "pattern" and isinstance(value, str):
            subs = [(None, compiles(value, at))]
        elif key == "patternProperties":
            for name, sub in patterns.items():
                subs += [(None, keys_compiled and compiles(name, (*at, name))),
                         (sub, (*at, name))]
        elif key in ("properties", "dependencies") and isinstance(value, dict):
            subs = [(sub, (*at, name)) for name, sub in value.items()]
        elif key in ("allOf", "anyOf", "oneOf", "items") and isinstance(value, list):
            subs = [(sub, (*at, index)) for index, sub in enumerate(value)]
        elif key in ("additionalProperties", "items", "not", "if", "contains", "propertyNames",
                     "additionalItems") or key in ("then", "else") and "if" in schema:
            if key == "additionalProperties" and keys_compiled:
                subs = [(None, compiles(name, (*path, "patternProperties", name)))
                        for name in patterns]
            subs.append((value, at))
        for sub, where in subs:
            fault = where if sub is None else _regex_fault(sub, root, where, seen)
            if fault:
                return fault
    return None


def _pointer_target(root: Any, pointer: tuple) -> Any:
    node = root
    for part in pointer:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def schema_error(schema: Any, keeps_schemas: bool = False) -> str | None:
    """None if `schema` is a valid JSON Schema, else the validator's complaint."""
    fault = schema_fault(schema, keeps_schemas)
    return None if fault is None else fault.message
