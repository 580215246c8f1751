"""JSON text read into JSON values held as plain Python objects, as `JSON.parse` reads it:
integral numbers below 2**53 as int, NaN/Infinity refused, object keys in JavaScript's property
order, JSON.parse's error texts (vm/core/json_errors.py); text nested deeper than
MAX_JSON_DEPTH refused before it is parsed; a JSON array's items filtered as they are read;
and `--args-json`'s object."""

from __future__ import annotations

import gc
import itertools
import json
from collections.abc import Callable
from typing import Any

from vm.core.js import MAX_SAFE, js_object
from vm.core.patterns import compiled

__all__ = ["ARRAY_BATCH", "JSONTooDeep", "MAX_JSON_DEPTH", "json_array_kept", "json_depth_over", "json_loads",
           "parse_args_json"]


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
    if len(text) <= limit:
        return False
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = data.translate(None, _NOT_SHAPE)
    if len(shape) - shape.count(b'"') <= limit:  # too few brackets, in strings or not
        return False
    shape = shape.replace(b'""', b"")
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


# characters of an array `json_array_kept` reads in one go: some hundreds of items, held at
# once only while the keep test sees them
ARRAY_BATCH = 1 << 16


def json_array_kept(text: str, keep: Callable[[Any], bool],
                    batch: int = ARRAY_BATCH) -> list | None:
    """The items of the JSON array `text` (white space around it allowed, as str.strip takes
    it) that `keep` keeps, tested as they are read, so that the ones dropped are never all
    held at once: the values `[v for v in json_loads(text.strip()) if keep(v)]` gives.
    None where this cannot tell (not an array, malformed, too deep, or `keep` raised): the
    caller then reads the text whole, as before, and gets its answer or its error.

    The items are read some `batch` characters at a time, as one array (_items_before), up to
    the last comma there; where that comma is not between two of the array's own items, the
    items up to it are read one at a time instead."""
    start, end = 0, len(text)
    while start < end and text[start].isspace():
        start += 1
    if start == end or text[start] != "[" or json_depth_over(text):
        return None
    scan = json.JSONDecoder(**_hooks(text)).scan_once
    space = _JSON_SPACE.match
    kept: list = []
    add, add_all = kept.append, kept.extend
    at = space(text, start + 1).end()
    one_at_a_time_until = at
    try:
        with _CollectorPaused(text):
            if text[at] == "]":
                at += 1
            else:
                while True:
                    if at >= one_at_a_time_until:
                        comma = text.rfind(",", at, at + batch)
                        if comma > at:
                            items = _items_before(scan, text, at, comma)
                            if items is not None:
                                add_all(filter(keep, items))
                                at = space(text, comma + 1).end()
                                continue
                            one_at_a_time_until = comma
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


def _items_before(scan: Callable, text: str, at: int, comma: int) -> list | None:
    """The array items from `at` (the first character of one) to the comma at `comma`, read
    as one array, `[` + text + `]`; None where that is not one JSON array. It is one only
    where the comma lies outside every string and at the array's own depth (cut inside a
    string, the last string is never closed; cut inside an item, its brackets are not), and
    then its values are the very ones the items read one by one give."""
    wrapped = "[" + text[at:comma] + "]"
    try:
        items, end = scan(wrapped, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return items if end == len(wrapped) else None  # (`1] [2`: an array, then more)


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
