"""Applying a schema of the dialect (vm.core.schema) to a value: the errors Ajv reports, in
its order and its words. jsonschema finds the errors; their order is Ajv's evaluation order.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from vm.core.schema import (
    _RANK,
    SchemaRecursion,
    _additional,
    _pointer_target,
    _type_group,
    _unescape,
    _validator_class,
)


@lru_cache(maxsize=64)
def _validator(schema_text: str, first: bool):
    return _validator_class(first)(json.loads(schema_text))


def first_error(schema: Any, value: Any) -> tuple[str, str] | None:
    """(instance path as a JSON pointer, '/' for the root; message) of the error Ajv would
    report first, or None when `value` is valid. A failed `anyOf`/`oneOf` is reported by the
    first error of its first failing branch, as Ajv lists those before its own."""
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
    errors = sorted(_iter_errors(schema, value, first=True),
                    key=lambda e: _order(e, schema, value))
    if not errors:
        return None
    error = errors[0]
    while error.context:
        if error.validator in ("anyOf", "oneOf") and isinstance(error.validator_value, list):
            # Ajv tries the branches in order, and a failed one's errors come before the
            # combinator's own: the first is the first failing branch's first error
            branch = min(e.relative_schema_path[0] for e in error.context)
            root = {"$branch": error.validator_value[branch]}
            error = min((e for e in error.context if e.relative_schema_path[0] == branch),
                        key=lambda e: _order(e, root, value))
        else:
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


def _iter_errors(schema: Any, value: Any, first: bool = False) -> list:
    from referencing.exceptions import Unresolvable

    from vm.core.js_regex import JsRegexSyntaxError

    try:
        return list(_validator(json.dumps(schema), first).iter_errors(value))
    except (Unresolvable, JsRegexSyntaxError) as exc:  # a regex of a
        # schema stored before regexes were read as JavaScript's, or one ours cannot apply
        raise _Unapplicable(f"the response schema cannot be applied: {exc}") from None
    except RecursionError:  # (a `$ref` that never ends is caught before, as SchemaRecursion)
        raise SchemaRecursion("Maximum call stack size exceeded") from None



def _extra_properties(error) -> int:
    """How many errors Ajv gives for this one: `additionalProperties` reports each extra
    property on its own, jsonschema all of them in one error."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return 1
    return max(1, len(_additional(error.instance, error.schema)))


def _names_property(error) -> bool:
    path = [p for p in error.relative_schema_path if p != "$ref"]
    return bool(path) and path[0] == "propertyNames"


def _pointer(error) -> str:
    return "".join(f"/{p}" for p in error.absolute_path) or "/"


def _type_rank(schema: Any) -> float:
    """Where Ajv reports a schema's `type` error: first, unless the schema names one type and
    has keywords of that type's group; then the group reports it in its place (after `$ref`,
    `enum`, `not`, the combinators and the groups of other types)."""
    group = _type_group(schema)
    return _RANK["type"] if group is None else _RANK[group] - 0.5


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
        key.append(_type_rank(node) if keyword == "type" else _RANK.get(keyword, len(_RANK)))
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
        elif keyword == "$ref" and isinstance(child, str) and child.startswith("#"):
            node = _pointer_target(schema, tuple(_unescape(p) for p in child[1:].split("/")[1:]))
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
