"""A JSON Schema compiled to one Python predicate, for the keywords the workflow file schema uses.

Validating a file with jsonschema walks the schema afresh for every value (a validator object per
descent); for a file that is valid, which nearly every file is, that walk is all the work there is
and a closure tree does it in a tenth of the time. The predicate only says yes or no: when it says
no, jsonschema runs and words the error, so what users read does not depend on this module.

Only what the workflow schema needs is supported; `compile_schema` refuses anything else rather
than guess, so a keyword added to the schema fails loudly until it is supported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# keywords that never change a verdict
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "examples", "default", "$comment"})


def compile_schema(schema: Any) -> Check:
    """A predicate that is True exactly when jsonschema (draft 2020-12) finds `instance` valid.
    The schema must be reference-free and use only the keywords below."""
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, dict):
        raise ValueError(f"not a schema: {schema!r}")
    unknown = set(schema) - _ANNOTATIONS - set(_KEYWORDS)
    if unknown:
        raise ValueError(f"schema keyword not supported: {', '.join(sorted(unknown))}")
    checks = [_KEYWORDS[key](schema[key], schema) for key in _KEYWORDS if key in schema]
    checks = [check for check in checks if check is not _always]
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def all_of(instance: Any) -> bool:
        return all(check(instance) for check in checks)

    return all_of


def _always(instance: Any) -> bool:
    return True


def _never(instance: Any) -> bool:
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    # 1.0 is an integer to JSON Schema
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or float(v).is_integer()),
}


def _type(value: Any, schema: dict) -> Check:
    names = value if isinstance(value, list) else [value]
    tests = [_TYPES[name] for name in names]
    if len(tests) == 1:
        return tests[0]
    return lambda instance: any(test(instance) for test in tests)


def _enum(value: Any, schema: dict) -> Check:
    members = [(_json_kind(member), member) for member in value]
    return lambda instance: any(
        kind == _json_kind(instance) and _json_equal(member, instance) for kind, member in members)


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
    checks = {name: check for name, check in checks.items() if check is not _always}

    def properties(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        if len(instance) < len(checks):  # a step sets a few of its many properties
            for name, item in instance.items():
                check = checks.get(name)
                if check is not None and not check(item):
                    return False
            return True
        for name, check in checks.items():
            if name in instance and not check(instance[name]):
                return False
        return True

    return properties


def _additional_properties(value: Any, schema: dict) -> Check:
    known = frozenset(schema.get("properties", {}))
    if "patternProperties" in schema:
        raise ValueError("schema keyword not supported: patternProperties")
    check = compile_schema(value)
    if check is _always:
        return _always

    def additional(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(check(item) for name, item in instance.items() if name not in known)

    return additional


def _required(value: list, schema: dict) -> Check:
    names = tuple(value)
    return lambda instance: not isinstance(instance, dict) or all(name in instance for name in names)


def _items(value: Any, schema: dict) -> Check:
    check = compile_schema(value)
    if check is _always:
        return _always
    return lambda instance: not isinstance(instance, list) or all(check(item) for item in instance)


def _min_items(value: int, schema: dict) -> Check:
    return lambda instance: not isinstance(instance, list) or len(instance) >= value


def _min_length(value: int, schema: dict) -> Check:
    return lambda instance: not isinstance(instance, str) or len(instance) >= value


def _minimum(value: float, schema: dict) -> Check:
    return lambda instance: not (_is_number(instance) and instance < value)  # NaN passes, as there


def _maximum(value: float, schema: dict) -> Check:
    return lambda instance: not (_is_number(instance) and instance > value)


def _one_of(value: list, schema: dict) -> Check:
    checks = [compile_schema(sub) for sub in value]

    def one_of(instance: Any) -> bool:
        matched = 0
        for check in checks:
            if check(instance):
                matched += 1
                if matched > 1:
                    return False
        return matched == 1

    return one_of


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
