"""JSON text written from JSON values held as plain Python objects: `JSON.stringify` (compact
and indented, an undefined property left out, JavaScript's numbers, lone surrogates escaped),
the byte size of the indented text without writing it where it can be told otherwise, values
joined as the original joins them, and Python's own compact JSON for our records, tokens and
hashes. The C encoder writes what it writes as JavaScript would; anything else is walked here."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from vm.core.js import MAX_SAFE, UNDEFINED, format_number, to_string
from vm.core.patterns import compiled

__all__ = ["joined_text", "json_compact", "json_pretty", "json_pretty_size", "plain_dumps",
           "to_text", "without_undefined"]


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
    for x in v:  # the value's dispatch written out again, as for an object's: a call per
        out.append(sep)  # value took 4-6% longer over 100 000 objects
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

