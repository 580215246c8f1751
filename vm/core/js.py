"""JavaScript value semantics over JSON values held as plain Python objects: `undefined`,
`Number()`/`String()`, `==` and `<`, property paths, `JSON.stringify` and `JSON.parse`."""

from __future__ import annotations

import gc
import itertools
import json
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from vm.core.patterns import compiled

__all__ = [
    "UNDEFINED", "compare", "format_number", "get_path", "get_prop", "get_value_path",
    "is_array_index", "js_object", "js_parse_int", "js_trim", "js_type", "json_compact",
    "joined_text", "json_loads", "json_pretty", "JSONTooDeep", "MAX_JSON_DEPTH", "loose_eq", "to_number", "to_string", "truthy", "utf16_len",
    "utf16_lt", "without_undefined",
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


# ---- JSON -----------------------------------------------------------------------------

class _NeedsWalk(Exception):
    pass


def _refuse(_: Any) -> Any:
    raise _NeedsWalk


_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]
_c_make_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]
if _c_make_encoder is not None:
    _c_compact = _c_make_encoder(None, _refuse, _encode_str, None, ":", ",", False, False, False)

    def _encode_compact(v: Any) -> str:
        return "".join(_c_compact(v, 0))
else:  # pragma: no cover - CPython always has the C encoder
    _encode_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                       check_circular=False, default=_refuse).encode
def _not_serializable(o: Any) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


_PLAIN_ENCODERS: dict[tuple, Callable[[Any], str]] = {}


def plain_dumps(v: Any, ascii_only: bool = True, sort_keys: bool = False,
                default: Callable[[Any], Any] = _not_serializable) -> str:
    """`json.dumps(v, separators=(",", ":"), ensure_ascii=ascii_only, sort_keys=sort_keys,
    default=default)`, Python's JSON (not JavaScript's), for our own records, tokens and
    hashes: the C encoder made once per set of options, not once a call."""
    found = _PLAIN_ENCODERS.get((ascii_only, sort_keys, default))
    if found is None:
        if _c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
            found = json.JSONEncoder(ensure_ascii=ascii_only, separators=(",", ":"),
                                     sort_keys=sort_keys, default=default).encode
        else:
            quote = (json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
                     if ascii_only else _encode_str)
            # no markers (no cycle check: a cycle ends in RecursionError, as deep nesting
            # does): a dict of markers kept across calls would keep an entry a failed call left
            encoder = _c_make_encoder(None, default, quote, None, ":", ",", sort_keys, False, True)
            found = lambda value: "".join(encoder(value, 0))  # noqa: E731
        _PLAIN_ENCODERS[(ascii_only, sort_keys, default)] = found
    return found(v)


_PY_FLOAT_RE = compiled(r"[0-9]e[+-][0-9]|[0-9]\.0(?![0-9])")
_SURROGATE_RE = compiled("[\ud800-\udfff]")
_LONG_DIGITS_RE = compiled("[0-9]{16}")


def _escape_surrogates(text: str) -> str:
    """Lone surrogates become `\\udxxx` escapes, as the well-formed JSON.stringify writes them."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub(lambda m: "\\u%04x" % ord(m.group()), text)
    return text


def _python_numbers_in(text: str) -> bool:
    """Whether the C encoder's text may hold a number JavaScript writes otherwise: a float in
    Python's spelling, or an integer past 2**53 (written in full, where JavaScript rounds it)."""
    return (("e+" in text or "e-" in text or ".0" in text)
            and _PY_FLOAT_RE.search(text) is not None) or _LONG_DIGITS_RE.search(text) is not None


def _scalar_text(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _encode_str(v)
    if isinstance(v, (int, float)):
        return format_number(v) if math.isfinite(v) else "null"
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _write(v: Any, nl: str, step: str, colon: str, out: list[str]) -> None:
    """Append the JSON text of a dict or list to `out`; `nl` is the newline plus indentation
    of its own line ("" when compact), `step` one more level of indentation."""
    inner = nl + step
    if isinstance(v, dict):
        mark = len(out)
        sep = "{" + inner
        for key, x in v.items():
            if x is UNDEFINED:
                continue
            out.append(sep)
            out.append(_encode_str(key if isinstance(key, str) else to_string(key)))
            out.append(colon)
            tx = type(x)
            if tx is str:
                out.append(_encode_str(x))
            elif tx is int and -MAX_SAFE < x < MAX_SAFE:
                out.append(repr(x))
            elif tx is dict or tx is list or isinstance(x, (dict, list, tuple)):
                _write(x, inner, step, colon, out)
            else:
                out.append(_scalar_text(x))
            sep = "," + inner
        out.append("{}" if len(out) == mark else nl + "}")
        return
    if not v:
        out.append("[]")
        return
    sep = "[" + inner
    for x in v:
        out.append(sep)
        tx = type(x)
        if tx is str:
            out.append(_encode_str(x))
        elif tx is int and -MAX_SAFE < x < MAX_SAFE:
            out.append(repr(x))
        elif tx is dict or tx is list or isinstance(x, (dict, list, tuple)):
            _write(x, inner, step, colon, out)
        else:
            out.append("null" if x is UNDEFINED else _scalar_text(x))
        sep = "," + inner
    out.append(nl + "]")


def _stringify(v: Any, step: str) -> str:
    if v is UNDEFINED:
        raise ValueError("undefined has no JSON text")
    if not isinstance(v, (dict, list, tuple)):
        return _escape_surrogates(_scalar_text(v))
    out: list[str] = []
    _write(v, "\n" if step else "", step, ": " if step else ":", out)
    return _escape_surrogates("".join(out))


def json_compact(v: Any) -> str:
    """`JSON.stringify(v)`. Top-level undefined has no JSON text: ValueError."""
    try:
        text = _encode_compact(v)
    except (_NeedsWalk, ValueError):
        return _stringify(v, "")
    if _python_numbers_in(text):
        return _stringify(v, "")
    return _escape_surrogates(text)


def without_undefined(v: Any) -> Any:
    """`v` as JSON keeps it: an undefined property left out of its object, an undefined array
    item null (a top-level undefined stays). `v` itself when it holds no undefined, else a
    copy: for what stores values as data (frames, state files), which JSON.stringify would."""
    if isinstance(v, dict):
        out = {}
        for key, x in v.items():
            if x is not UNDEFINED:
                out[key] = without_undefined(x) if isinstance(x, (dict, list, tuple)) else x
        return v if len(out) == len(v) and all(out[k] is v[k] for k in out) else out
    if isinstance(v, (list, tuple)):
        items = [None if x is UNDEFINED else without_undefined(x) for x in v]
        return v if all(a is b for a, b in zip(items, v)) else items
    return v


def to_text(v: Any) -> str:
    """A value as text where the original joins or prints values: strings as they are, any
    other value as compact JSON."""
    return v if isinstance(v, str) else json_compact(v)


def joined_text(items: list, sep: str) -> str:
    """`items.map(x => typeof x === "string" ? x : JSON.stringify(x)).join(sep)`: an undefined
    item (which has no JSON text) joins as ""."""
    return sep.join("" if x is UNDEFINED else to_text(x) for x in items)


def parse_args_json(text: str, command: str) -> dict:
    """`--args-json` / `argsJson`: a JSON object. ValueError with the original's wording
    (JSONTooDeep, with its own, for a text nested deeper than MAX_JSON_DEPTH)."""
    try:
        value = json_loads(text)
    except JSONTooDeep as exc:
        raise JSONTooDeep(f"{command} --args-json: {exc}") from None
    except ValueError as exc:  # the cause keeps the position (vm.service.protocol.envelope)
        raise ValueError(f"{command} --args-json must be valid JSON") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{command} --args-json must be a JSON object")
    return value


def json_pretty(v: Any) -> str:
    """`JSON.stringify(v, null, 2)`. Top-level undefined has no JSON text: ValueError."""
    return _stringify(v, "  ")


def json_pretty_size(v: Any) -> int:
    """`len(json_pretty(v).encode("utf-8"))` without writing the pretty text where it can be
    told otherwise: the C encoder's compact text and what the indentation adds, counted over
    the containers. A value holding anything but dicts, lists, tuples, strings, booleans, null
    and integers within 2**53 (a float, which the C encoder writes as Python does; a key that
    is not a string; a subclass) is written out and measured."""
    try:
        extra = _indentation(v, 0)
        text = _encode_compact(v)
    except (_NeedsWalk, ValueError):
        return len(json_pretty(v).encode("utf-8"))
    return len(_escape_surrogates(text).encode("utf-8")) + extra


_PLAIN = frozenset({str, int, bool, type(None)})  # written alike by the C encoder and JavaScript


def _indentation(v: Any, depth: int) -> int:
    """What `json_pretty` adds to the compact text of `v` written at `depth`: each member on
    its own line indented one step deeper ("\n" and two spaces a level), the closing bracket
    on its own line, and a space after each key's colon. _NeedsWalk at a number or key the
    C encoder would write otherwise than JavaScript."""
    if isinstance(v, dict):
        count = extra = 0
        for key, x in v.items():
            if type(key) is not str:
                raise _NeedsWalk
            if x is UNDEFINED:
                continue
            count += 1
            tx = type(x)
            if tx is dict or tx is list or tx is tuple:
                extra += _indentation(x, depth + 1)
            elif tx not in _PLAIN or (tx is int and not -MAX_SAFE < x < MAX_SAFE):
                raise _NeedsWalk
        return extra + count * (4 + 2 * depth) + 1 + 2 * depth if count else 0
    tv = type(v)
    if tv is not list and tv is not tuple:
        if tv not in _PLAIN or (tv is int and not -MAX_SAFE < v < MAX_SAFE):
            raise _NeedsWalk
        return 0
    if not v:
        return 0
    extra = 0
    for x in v:
        tx = type(x)
        if tx is dict or tx is list or tx is tuple:
            extra += _indentation(x, depth + 1)
        elif tx not in _PLAIN or (tx is int and not -MAX_SAFE < x < MAX_SAFE):
            raise _NeedsWalk
    return extra + len(v) * (3 + 2 * depth) + 1 + 2 * depth


# digits, quotes and colons, every other byte an x (white space is deleted: `"1" :` reads 9":)
_SHAPE = bytes(ord("9") if 48 <= i <= 57 else i if i in b'":' else ord("x") for i in range(256))
_INDEX_KEY_RE = compiled(r'"(?:0|[1-9][0-9]*)"[ \t\n\r]*:')


def _text_shape(text: str) -> tuple[bool, bool]:
    """(may hold an integer of 16+ digits, may hold an array-index key): cheap over-estimates."""
    shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE, b" \t\n\r")
    big = b"9" * 16 in shape
    index_keys = b'9":' in shape and _INDEX_KEY_RE.search(text) is not None
    return big, index_keys


def _parse_float(s: str) -> float | int:
    f = float(s)
    return int(f) if f.is_integer() and abs(f) < MAX_SAFE else f


def _parse_int(s: str) -> float | int:
    return int(s) if len(s) < 16 else _parse_float(s)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Unexpected token {name[0]!r}: {name} is not valid JSON")


# JSON text nested deeper than this is refused wherever Lobster reads it (requests, args,
# answers, tokens, a child's stdout): deeper values could not be stored in a checkpoint.
MAX_JSON_DEPTH = 256
# what a JSON text's nesting is read from: quotes and brackets (every other byte deleted), and
# each bracket's step in depth
_NOT_SHAPE = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # for depth, a brace is a bracket
_DEPTH_STEP = tuple(1 if byte in b"[{" else -1 if byte in b"]}" else 0 for byte in range(256))


class JSONTooDeep(ValueError):
    """JSON text nested deeper than MAX_JSON_DEPTH."""

    def __init__(self, message: str = f"JSON nested deeper than {MAX_JSON_DEPTH} levels") -> None:
        super().__init__(message)


def json_depth_over(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text opens more than `limit` arrays or objects inside each other (strings
    are skipped; a text that is not JSON at all gives some answer, and is refused later).
    Done with bytes operations only (a 12 MB text in about 20 ms, where a pass of a string
    pattern took 250): escaped backslashes and quotes go, then every byte but quotes and
    brackets; a string then reads `"..."` with only its brackets inside, and the many that
    hold none are dropped whole before the few left are cut out."""
    if text.count("[") + text.count("{") <= limit:
        return False
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = data.translate(None, _NOT_SHAPE).replace(b'""', b"")
    if b'"' in shape:
        shape = b"".join(shape.split(b'"')[::2])  # the even pieces lie outside strings
    # Well-formed brackets: each pass takes out the innermost pairs, one level of all of
    # them at once (replace does not look again at what its own cuts bring together), so a
    # text `limit` deep or less is empty after `limit` passes; a shallow one is after a few
    # fast passes. Anything else (too deep, or brackets that do not pair) is counted below.
    paired = shape.translate(_ONE_KIND)
    for _ in range(limit):
        inner = paired.replace(b"[]", b"")
        if not inner:
            return False
        if len(inner) == len(paired):
            break
        paired = inner
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, shape)), default=0) > limit


def json_loads(text: str | bytes) -> Any:
    """`JSON.parse`: integral numbers below 2**53 become int, larger ones float (as JS would
    hold them), NaN/Infinity literals are rejected, object keys take JS property order. Text
    nested deeper than MAX_JSON_DEPTH is refused (JSONTooDeep, a ValueError)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    if json_depth_over(text):
        raise JSONTooDeep()
    hooks = _hooks(text)
    with _CollectorPaused(text):
        try:
            return json.loads(text, **hooks)
        except ValueError as exc:  # JSON.parse's words; `msg`/`pos` stay Python's (detail)
            from vm.core.json_errors import json_parse_message

            exc.args = (json_parse_message(text) or str(exc),)
            raise


class _CollectorPaused:
    """Around the parse of a JSON text of 1 MiB or more, the cycle collector paused: parsing
    makes no cycles, and the collections its many new containers would set off (each older
    one walking every object made so far) were a fifth of the parse of a 100 000-item array.
    A shorter text, or a collector someone else paused, is left as it is."""

    __slots__ = ("paused",)

    def __init__(self, text: str) -> None:
        self.paused = len(text) >= 1 << 20 and gc.isenabled()

    def __enter__(self) -> None:
        if self.paused:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.paused:
            gc.enable()


def _hooks(text: str) -> dict[str, Any]:
    """What JSON.parse's numbers and key order need of Python's decoder, for this text."""
    hooks: dict[str, Any] = {"parse_float": _parse_float, "parse_constant": _reject_constant}
    big, index_keys = _text_shape(text)
    if big:
        hooks["parse_int"] = _parse_int
    if index_keys:
        hooks["object_pairs_hook"] = js_object
    return hooks


_SPACES = " \t\n\r"  # JSON's white space
_JSON_SPACE = compiled(f"[{_SPACES}]*")


def json_array_kept(text: str, keep: Callable[[Any], bool]) -> list | None:
    """The items of the JSON array `text` (white space around it allowed, as str.strip takes
    it) that `keep` keeps, each parsed and tested in turn, so that the ones dropped are never
    all held at once: the values `[v for v in json_loads(text.strip()) if keep(v)]` gives.
    None where this cannot tell (not an array, malformed, too deep, or `keep` raised): the
    caller then reads the text whole, as before, and gets its answer or its error."""
    start, end = 0, len(text)
    while start < end and text[start].isspace():
        start += 1
    if start == end or text[start] != "[" or json_depth_over(text):
        return None
    scan = json.JSONDecoder(**_hooks(text)).scan_once
    space = _JSON_SPACE.match
    kept: list = []
    add = kept.append
    at = space(text, start + 1).end()
    try:
        with _CollectorPaused(text):
            if text[at] == "]":
                at += 1
            else:
                while True:
                    value, at = scan(text, at)  # StopIteration or JSONDecodeError: malformed
                    if keep(value):
                        add(value)
                    mark = text[at]  # (an IndexError at the end of the text)
                    if mark in _SPACES:
                        at = space(text, at).end()
                        mark = text[at]
                    at += 1
                    if mark == ",":
                        if text[at] in _SPACES:  # one space (json.dumps' ", ") is read here
                            at = at + 1 if text[at] == " " and text[at + 1] not in _SPACES \
                                else space(text, at).end()
                    elif mark == "]":
                        break
                    else:
                        return None
    except Exception:  # noqa: BLE001 - any doubt: the whole text is read again, as before
        return None
    return None if text[at:].strip() else kept
