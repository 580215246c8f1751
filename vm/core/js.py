"""JavaScript value semantics over JSON values held as plain Python objects: `undefined`,
`typeof`, truthiness, `Number()`/`String()`, `==` and `<`, property paths. JSON text is written
in vm/core/json_write.py and read in vm/core/json_read.py."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

from vm.core.patterns import compiled

__all__ = [
    "UNDEFINED", "compare", "format_number", "get_path", "get_prop", "get_value_path",
    "is_array_index", "js_object", "js_parse_int", "js_trim", "js_type", "loose_eq", "to_number",
    "to_string", "truthy", "utf16_len", "utf16_lt",
]

MAX_SAFE = 2**53
_MAX_INDEX = 2**32 - 1


class _Undefined:
    """The one JS `undefined`: falsy, distinct from None (`null`)."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "undefined"

    def __reduce__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Any = _Undefined()

JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
WS_CLASS = "[" + re.escape(JS_WHITESPACE) + "]"


def js_trim(s: str) -> str:
    """`String.prototype.trim`: JS's whitespace set, not Python's."""
    return s.strip(JS_WHITESPACE)


def js_type(v: Any) -> str:
    """`typeof`, with `null` reported as "null" and arrays as "object"."""
    if v is None:
        return "null"
    if v is UNDEFINED:
        return "undefined"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "object"


def truthy(v: Any) -> bool:
    """JS truthiness: `[]` and `{}` are true, `NaN`, `0`, `""`, null, undefined are false."""
    if isinstance(v, float):
        return v == v and v != 0.0
    if isinstance(v, (list, dict)):
        return True
    return bool(v)


# ---- property paths -------------------------------------------------------------------

_INDEX_RE = compiled(r"0|[1-9][0-9]*")
_ASTRAL_RE = compiled("[\U00010000-\U0010ffff]")


def is_array_index(key: str) -> bool:
    """Whether `key` is a canonical array index ("0".."4294967294")."""
    return _INDEX_RE.fullmatch(key) is not None and int(key) < _MAX_INDEX


def _utf16_units(s: str) -> list[str]:
    raw = s.encode("utf-16-le", "surrogatepass")
    return [raw[i:i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


def utf16_len(s: str) -> int:
    """`s.length`: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s) + len(_ASTRAL_RE.findall(s))


def get_prop(value: Any, key: str) -> Any:
    """`value[key]` for own data properties: object keys, array/string indices and length."""
    if isinstance(value, dict):
        return value.get(key, UNDEFINED)
    if isinstance(value, (list, str)):
        if key == "length":
            return utf16_len(value) if isinstance(value, str) else len(value)
        if _INDEX_RE.fullmatch(key) is None:
            return UNDEFINED
        index = int(key)
        if isinstance(value, str) and not value.isascii() and _ASTRAL_RE.search(value):
            units = _utf16_units(value)
            return units[index] if index < len(units) else UNDEFINED
        return value[index] if index < len(value) else UNDEFINED
    return UNDEFINED


def get_path(value: Any, path: str) -> Any:
    """`where`'s path: split on "."; anything but an object or array on the way is undefined."""
    for key in path.split("."):
        if not isinstance(value, (dict, list)):
            return UNDEFINED
        value = get_prop(value, key)
    return value


def get_value_path(value: Any, path: str) -> Any:
    """The command path (sort, dedupe, groupBy, map, template): empty segments are skipped,
    a null/undefined on the way gives undefined, strings expose `length` and indices."""
    if "." not in path:  # one key, as nearly always: an object's field read at once
        if not path:
            return value
        return value.get(path, UNDEFINED) if type(value) is dict else get_prop(value, path)
    for key in path.split("."):
        if not key:
            continue
        if value is None or value is UNDEFINED:
            return UNDEFINED
        value = get_prop(value, key)
    return value


def js_object(pairs: Any) -> dict:
    """A dict in JS property order: array-index keys first (ascending), then insertion order."""
    d = dict(pairs)
    if not any(is_array_index(k) for k in d if isinstance(k, str)):
        return d
    index_keys = sorted((k for k in d if isinstance(k, str) and is_array_index(k)), key=int)
    out = {k: d[k] for k in index_keys}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


# ---- Number() -------------------------------------------------------------------------

_DECIMAL_RE = compiled(
    r"[+-]?(?:Infinity|[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)")
_RADIX_RE = compiled(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_RADIX = {"x": 16, "o": 8, "b": 2}


def _normalize(f: float) -> float | int:
    if f.is_integer() and abs(f) < MAX_SAFE and not (f == 0 and math.copysign(1.0, f) < 0):
        return int(f)
    return f


def _int_to_number(i: int) -> float | int:
    if abs(i) < MAX_SAFE:
        return i
    try:
        return float(i)
    except OverflowError:
        return math.inf if i > 0 else -math.inf


def _string_to_number(s: str) -> float | int:
    s = js_trim(s)
    if not s:
        return 0
    if _DECIMAL_RE.fullmatch(s):
        return _normalize(float(s))
    if _RADIX_RE.fullmatch(s):
        return _int_to_number(int(s[2:], _RADIX[s[1].lower()]))
    return math.nan


def to_number(v: Any) -> float | int:
    """JS `Number(v)`; integral results below 2**53 come back as int."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return _int_to_number(v)
    if isinstance(v, float):
        return v
    if v is None:
        return 0
    if isinstance(v, str):
        return _string_to_number(v)
    if isinstance(v, list):
        return _string_to_number(to_string(v))
    return math.nan


def js_parse_int(s: Any) -> float | int:
    """JS `parseInt(s)` without a radix: leading integer (hex after 0x), else NaN."""
    text = js_trim(to_string(s))
    sign = -1 if text.startswith("-") else 1
    if text[:1] in "+-" and text:
        text = text[1:]
    radix, digits = 10, "0123456789"
    if text[:2].lower() == "0x":
        radix, digits, text = 16, "0123456789abcdefABCDEF", text[2:]
    end = 0
    while end < len(text) and text[end] in digits:
        end += 1
    if end == 0:
        return math.nan
    return _int_to_number(sign * int(text[:end], radix))


# ---- String() -------------------------------------------------------------------------

def _float_digits(f: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive finite float and the decimal point position n
    (value = 0.digits * 10**n)."""
    mantissa, _, exp = repr(f).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    n = len(int_part) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    return stripped.rstrip("0"), n


def format_number(n: float | int) -> str:
    """JS `Number.prototype.toString()` (radix 10)."""
    if isinstance(n, bool):
        return "true" if n else "false"
    if isinstance(n, int):
        if abs(n) < MAX_SAFE:
            return str(n)
        n = _int_to_number(n)
    if n != n:
        return "NaN"
    if n in (math.inf, -math.inf):
        return "Infinity" if n > 0 else "-Infinity"
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    digits, point = _float_digits(abs(n))
    k = len(digits)
    if k <= point <= 21:
        return sign + digits + "0" * (point - k)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    e = point - 1
    exponent = ("e+" if e >= 0 else "e-") + str(abs(e))
    if k == 1:
        return sign + digits + exponent
    return sign + digits[0] + "." + digits[1:] + exponent


def to_string(v: Any) -> str:
    """JS `String(v)`."""
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    if v is UNDEFINED:
        return "undefined"
    if isinstance(v, (bool, int, float)):
        return format_number(v)
    if isinstance(v, (list, tuple)):
        return ",".join("" if x is None or x is UNDEFINED else to_string(x) for x in v)
    return "[object Object]"


# ---- == and < -------------------------------------------------------------------------

_PLAIN = (str, int, float)
_NUMERIC = (int, float)
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _to_primitive(v: Any) -> Any:
    return to_string(v) if isinstance(v, (list, tuple, dict)) else v


def loose_eq(a: Any, b: Any) -> bool:
    """JS abstract equality `a == b`."""
    if type(a) is type(b) and type(a) in _PLAIN:
        return a == b
    ta, tb = js_type(a), js_type(b)
    if ta == tb:
        return a is b if ta == "object" else a == b
    nullish = ("null", "undefined")
    if ta in nullish or tb in nullish:
        return ta in nullish and tb in nullish
    if ta == "number" and tb == "string":
        return a == to_number(b)
    if ta == "string" and tb == "number":
        return to_number(a) == b
    if ta == "boolean":
        return loose_eq(int(a), b)
    if tb == "boolean":
        return loose_eq(a, int(b))
    if ta == "object":
        return loose_eq(_to_primitive(a), b)
    return loose_eq(a, _to_primitive(b))


def utf16_lt(a: str, b: str) -> bool:
    """`a < b` for JS strings: UTF-16 code unit order."""
    if a.isascii() and b.isascii():
        return a < b
    return a.encode("utf-16-be", "surrogatepass") < b.encode("utf-16-be", "surrogatepass")


def compare(a: Any, op: str, b: Any) -> bool:
    """JS relational comparison for `<`, `<=`, `>`, `>=`."""
    order = _ORDER.get(op)
    if order is None:
        raise ValueError(f"unknown comparison operator: {op}")
    if type(a) in _NUMERIC and type(b) in _NUMERIC:
        return order(a, b)
    a, b = _to_primitive(a), _to_primitive(b)
    if isinstance(a, str) and isinstance(b, str):
        if a.isascii() and b.isascii():
            return order(a, b)
        return order(a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass"))
    return order(to_number(a), to_number(b))
