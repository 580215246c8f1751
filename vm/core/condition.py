"""Evaluation of compiled `when`/`condition` trees (plain data from lobsterc.syntax.expr).
Semantics of the reference's condition language: SameValue / deep equality, numeric-only
ordering, both sides of && and || evaluated, JavaScript truthiness of the result."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from vm.core import js

__all__ = ["MISSING", "evaluate", "truthy", "same_value", "deep_equal", "js_number"]


MISSING: Any = js.UNDEFINED  # a referenced field that does not exist (JavaScript `undefined`)

Resolve = Callable[[str, list[str]], Any]



def evaluate(tree: Any, resolve: Resolve) -> bool:
    """The truth value of a compiled condition. `resolve(step_id, path)` returns the referenced
    value or MISSING, and raises its own error for an unknown step id."""
    return truthy(_value(tree, resolve))


def _value(tree: Any, resolve: Resolve) -> Any:
    tag = tree[0]
    if tag == "const" or tag == "lit":
        return tree[1]
    if tag == "ref":
        return resolve(tree[1], list(tree[2]))
    if tag == "not":
        return not truthy(_value(tree[1], resolve))
    if tag == "and" or tag == "or":
        left = truthy(_value(tree[1], resolve))
        right = truthy(_value(tree[2], resolve))  # never short-circuited
        return (left and right) if tag == "and" else (left or right)
    if tag == "cmp":
        return _compare(tree[1], _value(tree[2], resolve), _value(tree[3], resolve))
    raise ValueError(f"unknown condition node {tag!r}")


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "==":
        return deep_equal(left, right)
    if op == "!=":
        return not deep_equal(left, right)
    a, b = _ordered_number(left), _ordered_number(right)
    if a is None or b is None:
        return False
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise ValueError(f"unknown comparison operator {op!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ordered_number(value: Any) -> float | None:
    """A number for `< <= > >=`: a non-NaN number or a non-blank numeric string, else None."""
    if _is_number(value):
        number = float(value) if isinstance(value, float) else value
    elif isinstance(value, str) and js.js_trim(value):
        number = js_number(value)
    else:
        return None
    if isinstance(number, float) and math.isnan(number):
        return None
    return number


def js_number(text: str) -> float | int:
    """JavaScript `Number(string)`: NaN when the text is not a numeric literal."""
    return js.to_number(text)


def same_value(a: Any, b: Any) -> bool:
    """JavaScript `Object.is` for primitives: no coercion, NaN equals NaN, +0 differs from -0."""
    if _is_number(a) and _is_number(b):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        if a == 0 and b == 0:
            return math.copysign(1.0, a) == math.copysign(1.0, b)
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if a is None or b is None or a is MISSING or b is MISSING:
        return a is b
    return False


def deep_equal(a: Any, b: Any) -> bool:
    """Structural equality: arrays element-wise, objects by key set (order-insensitive)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return same_value(a, b)


def truthy(value: Any) -> bool:
    """JavaScript truthiness: "", 0, -0, NaN, null and undefined are false; [] and {} are true."""
    return js.truthy(value)