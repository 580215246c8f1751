"""`{{path | filter args}}` templates: the `template` command, its filters, and the plain
`{{path}}` substitution that `map` assignments use."""

from __future__ import annotations

import errno
import functools
import math
import os
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context as DecimalContext, Decimal
from typing import Any

from vm.core import js, json_write
from vm.core.js_date import MAX_TIME, MS_PER_DAY, civil_from_days, date_parse
from vm.host.commands.base import Args, CommandError, Context
from vm.core.js import UNDEFINED

__all__ = ["FILTERS", "apply_filters", "parse_filter", "render_plain", "render_template",
           "split_filter_chain", "template"]

_PLACEHOLDER_RE = re.compile(rf"\{{\{{{js.WS_CLASS}*([^}}]+?){js.WS_CLASS}*\}}\}}")


_Hole = tuple[tuple[str, ...] | None, tuple[tuple[str, ...], ...]]


def _path_keys(path: str) -> tuple[str, ...] | None:
    """`.`/`this` (the whole item) -> None; else the non-empty dotted segments."""
    return None if path in (".", "this") else tuple(k for k in path.split(".") if k)


def _lookup(item: Any, keys: tuple[str, ...] | None) -> Any:
    if keys is None:
        return item
    value = item
    for key in keys:
        if value is None or value is UNDEFINED:
            return UNDEFINED
        value = value.get(key, UNDEFINED) if type(value) is dict else js.get_prop(value, key)
    return value


@functools.lru_cache(maxsize=512)
def _compile(text: str, filters: bool) -> tuple[tuple[str, ...], tuple[_Hole, ...]]:
    """Split a template into its literal runs and its placeholders (parsed once per text)."""
    literals, holes, last = [], [], 0
    for match in _PLACEHOLDER_RE.finditer(text):
        literals.append(text[last:match.start()])
        expr = js.js_trim(match.group(1))
        if filters:
            path, *chain = split_filter_chain(expr)
            holes.append((_path_keys(path), tuple(tuple(parse_filter(f)) for f in chain)))
        else:
            holes.append((_path_keys(expr), ()))
        last = match.end()
    literals.append(text[last:])
    return tuple(literals), tuple(holes)


def _render_value(value: Any) -> str:
    if value is None or value is UNDEFINED:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return js.to_string(value)
    return json_write.json_compact(value)


def _plain_value(value: Any) -> str:
    if value is None or value is UNDEFINED:
        return ""
    return json_write.to_text(value)


def render_plain(text: str, item: Any) -> str:
    """`map`'s substitution: each `{{path}}` (no filters) becomes the value at `path` of
    `item` (`.`/`this` = the item): "" for null/undefined, strings raw, else JSON."""
    literals, holes = _compile(text, False)
    out = [literals[0]]
    for (keys, _), literal in zip(holes, literals[1:]):
        out.append(_plain_value(_lookup(item, keys)))
        out.append(literal)
    return "".join(out)


def render_template(text: str, item: Any) -> str:
    """Render every `{{path | filter args | ...}}` of `text` against `item`."""
    literals, holes = _compile(text, True)
    out = [literals[0]]
    for (keys, chain), literal in zip(holes, literals[1:]):
        out.append(_render_value(_apply(_lookup(item, keys), chain)))
        out.append(literal)
    return "".join(out)


# ---- expression syntax ----------------------------------------------------------------

def _scan_quoted(text: str, i: int) -> tuple[str, str, int]:
    """From the opening quote at `i`: (raw text with quotes and escapes, unescaped body, end)."""
    quote, j, body = text[i], i + 1, []
    while j < len(text) and text[j] != quote:
        if text[j] == "\\" and j + 1 < len(text):
            body.append(text[j + 1])
            j += 2
        else:
            body.append(text[j])
            j += 1
    end = min(j + 1, len(text))
    return text[i:end], "".join(body), end


def split_filter_chain(expr: str) -> list[str]:
    """Split on `|` outside quotes; every part trimmed. The first part is the path."""
    parts, current, i = [], [], 0
    while i < len(expr):
        ch = expr[i]
        if ch in "\"'":
            raw, _, i = _scan_quoted(expr, i)
            current.append(raw)
        elif ch == "|":
            parts.append(js.js_trim("".join(current)))
            current, i = [], i + 1
        else:
            current.append(ch)
            i += 1
    parts.append(js.js_trim("".join(current)))
    return parts


def parse_filter(expr: str) -> list[str]:
    """`name arg "quoted arg" ...` -> [name, *args]; only spaces separate arguments."""
    text, parts, i = js.js_trim(expr), [], 0
    while i < len(text):
        while i < len(text) and text[i] == " ":
            i += 1
        if i >= len(text):
            break
        if text[i] in "\"'":
            _, body, i = _scan_quoted(text, i)
            parts.append(body)
        else:
            end = text.find(" ", i)
            end = len(text) if end < 0 else end
            parts.append(text[i:end])
            i = end
    return parts or [text]


def _apply(value: Any, chain: tuple[tuple[str, ...], ...]) -> Any:
    for name, *args in chain:
        fn = FILTERS.get(name)
        if fn is None:
            raise CommandError(f"Unknown template filter: {name}")
        value = fn(value, *args)
    return value


def apply_filters(value: Any, filters: list[str]) -> Any:
    """Run `value` through each filter expression (`name args...`) in turn."""
    return _apply(value, tuple(tuple(parse_filter(f)) for f in filters))


# ---- filters --------------------------------------------------------------------------

def _text(v: Any) -> str:
    return "" if v is None or v is UNDEFINED else js.to_string(v)


def _utf16_prefix(s: str, end: int) -> str:
    if s.isascii():
        return s[:end] if end >= 0 else s[:max(len(s) + end, 0)]
    raw = s.encode("utf-16-le", "surrogatepass")
    units = len(raw) // 2
    end = end if end >= 0 else max(units + end, 0)
    return raw[:2 * end].decode("utf-16-le", "surrogatepass")


def _truncate(v: Any, n: str | None = None, *_: str) -> str:
    s = _text(v)
    limit = js.js_parse_int(n) if n is not None else math.nan
    limit = 80 if limit != limit else limit  # 0 (and -0) keep nothing: '...'
    if limit == math.inf or js.utf16_len(s) <= limit:
        return s
    return _utf16_prefix(s, int(limit)) + "..."


def _substitution(replacement: str, matched: str, before: str, after: str) -> str:
    out, i = [], 0
    while i < len(replacement):
        ch, nxt = replacement[i], replacement[i + 1:i + 2]
        if ch == "$" and nxt in ("$", "&", "`", "'") and nxt:
            out.append({"$": "$", "&": matched, "`": before, "'": after}[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def replace_all(s: str, old: str, new: str) -> str:
    """`s.replaceAll(old, new)` for a string pattern, with the `$$`, `$&`, `$'` and the
    `$` + backtick replacement patterns."""
    if "$" not in new:
        return s.replace(old, new)
    positions, start = [], 0
    while (found := s.find(old, start)) >= 0:
        positions.append(found)
        start = found + (len(old) or 1)
    out, last = [], 0
    for pos in positions:
        out.append(s[last:pos])
        out.append(_substitution(new, old, s[:pos], s[pos + len(old):]))
        last = pos + len(old)
    out.append(s[last:])
    return "".join(out)


def _replace(v: Any, old: str | None = None, new: str | None = None, *_: str) -> str:
    return replace_all(_text(v), old or "", new or "")


def _split(v: Any, sep: str | None = None, *_: str) -> list[str]:
    s = _text(v)
    sep = "," if sep is None else sep
    return list(s) if sep == "" else s.split(sep)


def _first(v: Any, *_: str) -> Any:
    return (v[0] if v else UNDEFINED) if isinstance(v, list) else v


def _last(v: Any, *_: str) -> Any:
    return (v[-1] if v else UNDEFINED) if isinstance(v, list) else v


def _length(v: Any, *_: str) -> int:
    if isinstance(v, list):
        return len(v)
    return js.utf16_len(v) if isinstance(v, str) else 0


def _join(v: Any, sep: str | None = None, *_: str) -> str:
    if not isinstance(v, list):
        return _text(v)
    return (", " if sep is None else sep).join(_text(x) for x in v)


def _json(v: Any, *_: str) -> Any:
    return UNDEFINED if v is UNDEFINED else json_write.json_pretty(v)


def _default(v: Any, fallback: str | None = None, *_: str) -> Any:
    if v is None or v is UNDEFINED or v == "":
        return UNDEFINED if fallback is None else fallback
    return v


def to_fixed(x: float | int, digits: int) -> str:
    """JS `Number.prototype.toFixed`: exact binary value, ties away from zero."""
    if digits < 0 or digits > 100:
        raise CommandError("toFixed() digits argument must be between 0 and 100")
    if not math.isfinite(x) or abs(x) >= 1e21:
        return js.to_string(x)
    exact = Decimal(x)
    quantum = Decimal(1).scaleb(-digits)
    text = f"{exact.quantize(quantum, rounding=ROUND_HALF_UP, context=DecimalContext(prec=200)):f}"
    return text if x < 0 or not text.startswith("-") else text[1:]


def _round(v: Any, n: str | None = None, *_: str) -> Any:
    number = js.to_number(v)
    if number != number:
        return v
    digits = js.js_parse_int(n) if n is not None else math.nan
    digits = 0 if digits != digits or digits == 0 else digits
    if not math.isfinite(digits):
        raise CommandError("toFixed() digits argument must be between 0 and 100")
    return js.to_number(to_fixed(number, int(digits)))


FILTERS: dict[str, Callable[..., Any]] = {
    "upper": lambda v, *_: _text(v).upper(),
    "lower": lambda v, *_: _text(v).lower(),
    "trim": lambda v, *_: js.js_trim(_text(v)),
    "truncate": _truncate,
    "replace": _replace,
    "split": _split,
    "first": _first,
    "last": _last,
    "length": _length,
    "join": _join,
    "json": _json,
    "string": lambda v, *_: _text(v),
    "default": _default,
    "round": _round,
    "date": lambda v, fmt=None, *_: _date(v, fmt),
}


# ---- the date filter ------------------------------------------------------------------

def parse_date(text: str) -> float:
    """JS `Date.parse`: the ES date-time format, then V8's legacy forms."""
    return date_parse(text)


def _time_value(v: Any) -> float:
    """`new Date(v).getTime()` as the filter builds it: epoch ms for numbers and digit strings."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        t = float(v)
    elif isinstance(v, str) and re.fullmatch("[0-9]+", js.js_trim(v)):
        t = float(js.to_number(v))
    else:
        t = parse_date(js.to_string(v))
    if not math.isfinite(t) or abs(t) > MAX_TIME:
        return math.nan
    return float(math.trunc(t))


def _utc_fields(t: float) -> tuple[int, int, int, int, int, int, int]:
    days, ms = divmod(int(t), MS_PER_DAY)
    y, mo, d = civil_from_days(days)
    return y, mo, d, ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000


def iso_string(t: float) -> str:
    """`Date.prototype.toISOString`."""
    y, mo, d, h, mi, s, ms = _utc_fields(t)
    year = f"{y:04d}" if 0 <= y <= 9999 else ("+" if y > 0 else "-") + f"{abs(y):06d}"
    return f"{year}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{ms:03d}Z"


def _date(v: Any, fmt: str | None) -> str:
    t = _time_value(v)
    if t != t:
        return js.to_string(v)
    if not fmt:
        return iso_string(t)
    y, mo, d, h, mi, s, _ = _utc_fields(t)
    for token, value in (("YYYY", str(y)), ("MM", f"{mo:02d}"), ("DD", f"{d:02d}"),
                         ("HH", f"{h:02d}"), ("mm", f"{mi:02d}"), ("ss", f"{s:02d}")):
        fmt = fmt.replace(token, value, 1)
    return fmt


# ---- the command ----------------------------------------------------------------------

_ERRNO_TEXT = {errno.ENOENT: "no such file or directory", errno.EACCES: "permission denied",
               errno.EISDIR: "illegal operation on a directory"}


def _read_template_file(name: str, cwd: str) -> str:
    try:
        with open(os.path.join(cwd, name), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        text = _ERRNO_TEXT.get(exc.errno or 0, exc.strerror or "i/o error")
        action = "read" if exc.errno == errno.EISDIR else f"open '{name}'"
        raise CommandError(f"{code}: {text}, {action}") from None


def template(args: Args, items: list, ctx: Context) -> list:
    """Render the template (`--text`, else `--file` relative to the cwd, else the positionals
    joined by spaces) once per item; each output item is a string."""
    text = args.get("text") if isinstance(args.get("text"), str) else ""
    file = args.get("file") if isinstance(args.get("file"), str) else ""
    if not text and file:
        text = _read_template_file(file, ctx.cwd)
    if not text and args.positionals:
        text = " ".join(args.positionals)
    if not text:
        raise CommandError("template requires --text or --file (or positional text)")
    return [render_template(text, item) for item in items]
