"""The one JSON Schema dialect of input gates (draft-07, as the original's Ajv): schemas are
checked with it when a workflow is compiled and answers are validated with it at resume, with
errors in the reference's (Ajv-style) wording. jsonschema is imported on first use only.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

# Ajv's evaluation order: `type` first, then the keywords of no particular type, then those of
# numbers, strings, arrays and objects; errors come out depth first in that order (observed
# against the original with every error reported). `items` is evaluated before `uniqueItems`.
_KEYWORD_ORDER = [
    "$ref", "type", "const", "enum", "not", "anyOf", "oneOf", "allOf", "if", "then", "else",
    "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "items",
    "additionalItems", "uniqueItems", "contains", "maxProperties", "minProperties", "required",
    "dependencies", "propertyNames", "additionalProperties", "properties", "patternProperties",
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


@lru_cache(maxsize=1)
def _validator_class():
    """draft-07 with its regexes read as Ajv reads them: JavaScript's, `u` mode
    (vm.core.js_regex), in `pattern`, `patternProperties` and what those leave to
    `additionalProperties`."""
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

    def is_integer(checker, instance) -> bool:  # Ajv's `!(x % 1) && !isNaN(x)`: ±Infinity too
        return Draft7Validator.TYPE_CHECKER.is_type(instance, "integer") or (
            isinstance(instance, float) and math.isinf(instance))

    return validators.extend(Draft7Validator, {
        "pattern": pattern, "patternProperties": pattern_properties,
        "additionalProperties": additional_properties},
        type_checker=Draft7Validator.TYPE_CHECKER.redefine("integer", is_integer))


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
    if fault is None and next(_refs(schema), None) is not None:
        from vm.core.schema_compile import reference_fault

        fault = _unresolved_ref(schema) or reference_fault(schema, keeps_schemas)
    return fault or _regex_fault(schema, schema)


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
        except (js_regex.JsRegexSyntaxError, js_regex.JsRegexUnsupported) as exc:
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


@lru_cache(maxsize=64)
def _validator(schema_text: str):
    return _validator_class()(json.loads(schema_text))


def first_error(schema: Any, value: Any) -> tuple[str, str] | None:
    """(instance path as a JSON pointer, '/' for the root; message) of the error Ajv would
    report first, or None when `value` is valid. A failed `anyOf`/`oneOf` is reported as
    itself, not by the error of one of its branches."""
    try:
        error = _first(schema, value)
    except _Unapplicable as exc:  # a schema stored before $refs were checked: refused
        return "/", str(exc)
    return None if error is None else (_pointer(error), _message(error))


def error_detail(schema: Any, value: Any) -> dict | None:
    """What the message of `first_error` leaves out (in Ajv's words it names no values): for
    a value outside an `enum`, its path and the allowed values. None otherwise."""
    try:
        error = _first(schema, value)
    except _Unapplicable:
        return None
    if error is None or error.validator != "enum" or not isinstance(error.validator_value,
                                                                      list):
        return None
    return {"path": _pointer(error), "allowed": list(error.validator_value)}


def _first(schema: Any, value: Any):
    errors = sorted(_iter_errors(schema, value), key=lambda e: _order(e, schema, value))
    if not errors:
        return None
    error = errors[0]
    while error.context and error.validator not in ("anyOf", "oneOf"):
        error = error.context[0]
    return error


def all_errors(schema: Any, value: Any) -> list[tuple[str, str]]:
    """Every error, as Ajv reports them with `allErrors` (what `llm.invoke --output-schema`
    lists): depth first in evaluation order, a failed `anyOf`/`oneOf` after its branches'."""
    out: list[tuple[str, str]] = []

    def emit(errors, root: Any) -> None:
        ordered = sorted(errors, key=lambda e: _order(e, root, value))
        for at, error in enumerate(ordered):
            if error.validator in ("anyOf", "oneOf") and error.context:
                for branch, sub in enumerate(error.validator_value):
                    emit([e for e in error.context if e.relative_schema_path[0] == branch],
                         {"$branch": sub})
            out.extend([(_pointer(error), _message(error))] * _extra_properties(error))
            if _names_property(error) and not (
                    at + 1 < len(ordered) and _names_property(ordered[at + 1])
                    and ordered[at + 1].instance == error.instance):
                out.append((_pointer(error), "property name must be valid"))

    try:
        emit(_iter_errors(schema, value), schema)
    except _Unapplicable as exc:
        return [("/", str(exc))]
    return out


class _Unapplicable(Exception):
    """The schema has a `$ref` that does not resolve inside it."""


def _iter_errors(schema: Any, value: Any) -> list:
    from referencing.exceptions import Unresolvable

    from vm.core.js_regex import JsRegexSyntaxError, JsRegexUnsupported

    try:
        return list(_validator(json.dumps(schema)).iter_errors(value))
    except (Unresolvable, JsRegexSyntaxError, JsRegexUnsupported) as exc:  # a regex of a
        # schema stored before regexes were read as JavaScript's, or one ours cannot apply
        raise _Unapplicable(f"the response schema cannot be applied: {exc}") from None


def _extra_properties(error) -> int:
    """How many errors Ajv gives for this one: `additionalProperties` reports each extra
    property on its own, jsonschema all of them in one error."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return 1
    return max(1, len(_additional(error.instance, error.schema)))


def _names_property(error) -> bool:
    path = error.relative_schema_path
    return bool(path) and path[0] == "propertyNames"


def _pointer(error) -> str:
    return "".join(f"/{p}" for p in error.absolute_path) or "/"


def _order(error, schema: Any, value: Any = None) -> list:
    """A sort key following Ajv's evaluation: keyword rank, then property (in the schema's
    order) or array index, level by level down the error's schema path."""
    path, data = list(error.relative_schema_path), list(error.relative_path)
    node: Any = schema
    key: list = []
    if isinstance(node, dict) and "$branch" in node:  # a branch of anyOf/oneOf
        key.append(path.pop(0))
        node = node["$branch"]
    while path:
        keyword = path.pop(0)
        key.append(_RANK.get(keyword, len(_RANK)))
        child = node.get(keyword) if isinstance(node, dict) else None
        if keyword in ("properties", "patternProperties") and path and isinstance(child, dict):
            name = path.pop(0)
            key.append(list(child).index(name) if name in child else len(child))
            node = child.get(name)
            if data:
                data.pop(0)
        elif keyword in ("allOf", "anyOf", "oneOf") and path and isinstance(path[0], int):
            index = path.pop(0)
            key.append(index)
            node = child[index] if isinstance(child, list) and index < len(child) else None
        elif keyword == "items" and isinstance(child, list) and path and isinstance(path[0], int):
            index = path.pop(0)
            key.append(index)
            node = child[index] if index < len(child) else None
            if data:
                data.pop(0)
        elif keyword == "propertyNames":
            owner = value
            for part in error.absolute_path:
                owner = owner[part] if isinstance(owner, (dict, list)) else None
            names = list(owner) if isinstance(owner, dict) else []
            key.append(names.index(error.instance) if error.instance in names else -1)
            node = child
        elif keyword in ("items", "additionalItems", "contains", "additionalProperties") \
                and path:
            step = data.pop(0) if data else ""
            key.append(step if isinstance(step, int) else -1)
            node = child
        elif keyword in ("not", "if", "then", "else", "dependencies") and path:
            node = child
        else:
            break
    return key


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
        "not": "must NOT be valid", "anyOf": "must match a schema in anyOf",
        "oneOf": "must match exactly one schema in oneOf",
    }
    if kw == "uniqueItems":
        return f"must NOT have duplicate items ({_duplicates(error)})"
    return simple.get(kw, error.message)


def _duplicates(error) -> str:
    """Ajv's pair of duplicate positions: scalars (items typed as such) are found scanning from
    the end, any items by comparing each with those before it, also from the end."""
    data = error.instance
    item_type = (error.schema.get("items") or {}).get("type") \
        if isinstance(error.schema.get("items"), dict) else None
    types = [item_type] if isinstance(item_type, str) else item_type or []
    if types and not any(t in ("object", "array") for t in types):
        seen: dict = {}
        for i in range(len(data) - 1, -1, -1):
            marker = json.dumps(data[i], sort_keys=True)
            if marker in seen:
                return f"items ## {seen[marker]} and {i} are identical"
            seen[marker] = i
    for i in range(len(data) - 1, -1, -1):
        for j in range(i - 1, -1, -1):
            if _equal(data[i], data[j]):
                return f"items ## {j} and {i} are identical"
    return "items are identical"


def _equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) \
        and isinstance(a, bool) == isinstance(b, bool)
