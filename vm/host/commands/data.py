"""The pure-data commands (where, pick, head, sort, dedupe, groupBy, map) and the json and
table renderers, with the reference's JavaScript semantics."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cmp_to_key
from operator import itemgetter
from typing import Any

from vm.core import js, json_write
from vm.core.patterns import compiled
from vm.host.commands.base import Args, CommandError, Context
from vm.core.js import UNDEFINED, get_value_path

__all__ = ["WHERE_RE", "dedupe", "group_by", "head", "map_items", "pick", "render_json",
           "render_table", "sort", "where", "where_parts"]

_LINE = r"[^\n\r\u2028\u2029]"
# The syntax of a `where` expression. `where_parts` reads it without compiling this pattern
# (its two classes of JavaScript white space took 0.6 ms of a cold `where` pipeline to compile);
# a property test holds the two to the same answers.
WHERE_RE = compiled(
    rf"([a-zA-Z0-9_.]+){js.WS_CLASS}*(==|=|!=|<=|>=|<|>){js.WS_CLASS}*({_LINE}+)\Z")
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_SPACES = frozenset(js.JS_WHITESPACE)
_BREAKS = frozenset("\n\r\u2028\u2029")
_WHERE_OPS = ("==", "=", "!=", "<=", ">=", "<", ">")  # tried in this order, as WHERE_RE does


def where_parts(expr: str) -> tuple[str, str, str] | None:
    """(path, operator, value) of a `where` expression, as `WHERE_RE.match(expr).groups()`
    gives them; None where WHERE_RE does not match."""
    size, end = len(expr), 0
    while end < size and expr[end] in _PATH_CHARS:
        end += 1
    if end == 0:
        return None
    at = end
    while at < size and expr[at] in _SPACES:
        at += 1
    for op in _WHERE_OPS:
        if not expr.startswith(op, at):
            continue
        start = value = at + len(op)
        while value < size and expr[value] in _SPACES:
            value += 1
        if value == size and value > start and expr[value - 1] not in _BREAKS:
            value -= 1  # the value needs a character: the last white space is given back
        rest = expr[value:]
        if rest and _BREAKS.isdisjoint(rest):
            return expr[:end], op, rest
    return None


def _first_positional(args: Args) -> str:
    return args.positionals[0] if args.positionals else ""


def _string_flag(args: Args, name: str) -> str | None:
    value = args.get(name)
    return value if isinstance(value, str) else None


# ---- where ----------------------------------------------------------------------------

def _where_literal(raw: str) -> Any:
    if raw == "true":
        return True
    if raw == "false":
        return False
    if raw == "null":
        return None
    number = js.to_number(raw)
    if number == number and js.js_trim(raw):
        return number
    return raw


def _predicate(expr: str) -> Callable[[Any], bool]:
    parts = where_parts(expr)
    if parts is None:
        raise CommandError(f"Invalid where expression: {expr}")
    path, op, raw = parts
    value, keys = _where_literal(raw), path.split(".")

    def lhs(item: Any) -> Any:
        for key in keys:
            if type(item) is dict:
                item = item.get(key, UNDEFINED)
            elif isinstance(item, (dict, list)):
                item = js.get_prop(item, key)
            else:
                return UNDEFINED
        return item

    if op in ("=", "==") and type(value) is str:
        def same_text(item: Any) -> bool:  # the common `field=word`: a string meets a string
            found = lhs(item)
            return found == value if type(found) is str else js.loose_eq(found, value)

        return same_text
    if op in ("=", "=="):
        return lambda item: js.loose_eq(lhs(item), value)
    if op == "!=":
        return lambda item: not js.loose_eq(lhs(item), value)
    return lambda item: js.compare(lhs(item), op, value)


def where(args: Args, items: list, ctx: Context) -> list:
    """Keep the items whose `path OP literal` holds under JS `==` / `<` semantics."""
    expr = _first_positional(args)
    if not expr:
        raise CommandError("where requires an expression (e.g. field=value)")
    keep = _predicate(expr)
    return [item for item in items if keep(item)]


def where_predicate(args: Args) -> Callable[[Any], bool] | None:
    """`where`'s test of one item, for what filters items as it makes them (exec --json
    before a where); None when `where` refuses these arguments (it then says why itself)."""
    expr = _first_positional(args)
    try:
        return _predicate(expr) if expr else None
    except CommandError:
        return None


# ---- pick -----------------------------------------------------------------------------

def pick(args: Args, items: list, ctx: Context) -> list:
    """Project objects (and arrays) onto the listed fields. A field the item lacks is there as
    undefined, as the reference's `out[f] = item[f]` sets it: the table lists it as a column,
    JSON leaves it out. `__proto__` is never an own field of the result (assigning it sets the
    prototype)."""
    spec = _first_positional(args)
    if not spec:
        raise CommandError("pick requires a comma-separated field list")
    fields = list(dict.fromkeys(f for f in (js.js_trim(s) for s in spec.split(",")) if f))
    index_fields = sorted((f for f in fields if js.is_array_index(f)), key=int)
    fields = index_fields + [f for f in fields if not js.is_array_index(f) and f != "__proto__"]
    return [_pick_one(item, fields) for item in items]


def _pick_one(item: Any, fields: list[str]) -> Any:
    if type(item) is dict:
        return {f: item.get(f, UNDEFINED) for f in fields}
    if isinstance(item, (dict, list)):
        return {f: js.get_prop(item, f) for f in fields}
    return item


# ---- head -----------------------------------------------------------------------------

def head(args: Args, items: list, ctx: Context) -> list:
    """The first `--n` items (default 10); a fractional N rounds up, as the reference's
    counting loop does."""
    n = 10 if args.get("n") is None else js.to_number(args.get("n"))
    if not math.isfinite(n) or n < 0:
        raise CommandError("head --n must be a non-negative number")
    return items[:math.ceil(n)]


# ---- sort -----------------------------------------------------------------------------

def _sort_key_getter(args: Args) -> Callable[[Any], Any]:
    key = _string_flag(args, "key")
    if not key:
        return lambda item: item
    return lambda item: get_value_path(item, key)


def _is_number(v: Any) -> bool:
    kind = type(v)
    return kind is int or kind is float or (isinstance(v, (int, float))
                                             and not isinstance(v, bool))


def _js_compare(a: Any, b: Any) -> int:
    a_missing, b_missing = a is None or a is UNDEFINED, b is None or b is UNDEFINED
    if a_missing or b_missing:
        return int(a_missing) - int(b_missing)
    if _is_number(a) and _is_number(b):
        return (a > b) - (a < b)
    sa, sb = js.to_string(a), js.to_string(b)
    return -1 if js.utf16_lt(sa, sb) else int(js.utf16_lt(sb, sa))


def _string_sort_key(strings: list[str]) -> Callable[[str], Any]:
    if all(s.isascii() for s in strings):
        return lambda s: s
    return lambda s: s.encode("utf-16-be", "surrogatepass")


def _sort_present(pairs: list[tuple[Any, Any]], desc: bool,
                  numbers: bool) -> list[tuple[Any, Any]]:
    """Sort (key, item) pairs whose keys are present and either all numbers or all not."""
    if numbers:
        return sorted(pairs, key=itemgetter(0), reverse=desc)
    strings = [js.to_string(k) for k, _ in pairs]
    order = _string_sort_key(strings)
    indexed = sorted(range(len(pairs)), key=lambda i: order(strings[i]), reverse=desc)
    return [pairs[i] for i in indexed]


def _sort_mixed(pairs: list[tuple[Any, Any]], desc: bool) -> list[tuple[Any, Any]]:
    sign = -1 if desc else 1
    indexed = list(enumerate(pairs))

    def cmp(x: tuple[int, tuple[Any, Any]], y: tuple[int, tuple[Any, Any]]) -> int:
        c = _js_compare(x[1][0], y[1][0])
        return sign * c if c else x[0] - y[0]

    return [p for _, p in sorted(indexed, key=cmp_to_key(cmp))]


def sort(args: Args, items: list, ctx: Context) -> list:
    """Stable sort by the item or `--key`: null/undefined last (first with `--desc`), numbers
    numerically, anything else by `String()` in UTF-16 order."""
    key_of = _sort_key_getter(args)
    desc = bool(args.get("desc"))
    pairs = [(key_of(item), item) for item in items]
    present = [p for p in pairs if p[0] is not None and p[0] is not UNDEFINED]
    numbers = _numbers_among([k for k, _ in present])
    if 0 < numbers < len(present):
        # numbers and non-numbers together: the comparator is not a total order, so only
        # the reference's own comparison sequence gives its result
        ordered = _sort_mixed(pairs, desc)
    else:
        missing = [p for p in pairs if p[0] is None or p[0] is UNDEFINED]
        ordered = _sort_present(present, desc, numbers == len(present))
        ordered = missing + ordered if desc else ordered + missing
    return [item for _, item in ordered]


_NUMBER_KINDS = frozenset({int, float})
_NOT_NUMBER_KINDS = frozenset({str, bool, dict, list})  # (exactly these: not subclasses)


def _numbers_among(keys: list) -> int:
    """How many keys are numbers (_is_number), told by their kinds alone where it can be."""
    kinds = set(map(type, keys))
    if kinds <= _NUMBER_KINDS:
        return len(keys)
    if kinds <= _NOT_NUMBER_KINDS:
        return 0
    return sum(map(_is_number, keys))


# ---- dedupe / groupBy -----------------------------------------------------------------

def _identity(value: Any) -> Any:
    return UNDEFINED if value is UNDEFINED else json_write.json_compact(value)


def dedupe(args: Args, items: list, ctx: Context) -> list:
    """Keep the first item of each `JSON.stringify` identity (of the item or its `--key`)."""
    key = _string_flag(args, "key")
    seen: set[Any] = set()
    out = []
    for item in items:
        ident = _identity(js.get_value_path(item, key) if key else item)
        if ident not in seen:
            seen.add(ident)
            out.append(item)
    return out


def group_by(args: Args, items: list, ctx: Context) -> list:
    """One `{key, items, count}` per `JSON.stringify` identity of `--key`, first-seen order."""
    flag = args.get("key")
    path = js.js_trim(js.to_string(flag)) if flag is not None else ""
    if not path:
        raise CommandError("groupBy requires --key")
    groups: dict[Any, tuple[Any, list]] = {}
    for item in items:
        value = js.get_value_path(item, path)
        groups.setdefault(_identity(value), (value, []))[1].append(item)
    # an undefined key stays a field (the table shows its column; JSON leaves it out)
    return [{"key": value, "items": members, "count": len(members)}
            for value, members in groups.values()]


# ---- map ------------------------------------------------------------------------------

def _assignments(positionals: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for token in positionals:
        name, sep, value = token.partition("=")
        name = js.js_trim(name)
        if sep and name:
            out.append((name, value))
    return out


def map_items(args: Args, items: list, ctx: Context) -> list:
    """`map`: `--wrap K` -> {K: item}; `--unwrap K` -> item[K]; `key=template` assignments
    rendered against the original item (non-objects first become {value: item})."""
    wrap, unwrap = _string_flag(args, "wrap"), _string_flag(args, "unwrap")
    if wrap and unwrap:
        raise CommandError("map cannot use both --wrap and --unwrap")
    if unwrap:
        return [_unwrap(item, unwrap) for item in items]
    assignments = _assignments(args.positionals)
    reorder = any(js.is_array_index(name) for name, _ in assignments)
    return [_map_one(item, wrap, assignments, reorder) for item in items]


def _unwrap(item: Any, key: str) -> Any:
    return js.get_prop(item, key) if isinstance(item, (dict, list)) else UNDEFINED


def _map_one(item: Any, wrap: str | None, assignments: list[tuple[str, str]], reorder: bool) -> Any:
    cur = {wrap: item} if wrap else item
    if not assignments:
        return cur
    cur = dict(cur) if isinstance(cur, dict) else {"value": cur}
    for name, template in assignments:
        cur[name] = _render_plain(template, item)
    return js.js_object(cur) if reorder else cur


# ---- renderers ------------------------------------------------------------------------

def render_json(items: list) -> str:
    """The `json` renderer's text: `JSON.stringify(items, null, 2)` and a newline."""
    return json_write.json_pretty(items) + "\n"


def _cell(value: Any) -> str:
    """The reference's cell text: "" for null/undefined, strings raw, numbers and booleans
    by `String()`, anything else compact JSON."""
    if isinstance(value, str):
        return value
    if value is None or value is UNDEFINED:
        return ""
    if isinstance(value, (bool, int, float)):
        return js.to_string(value)
    return json_write.json_compact(value)


def _table_cell(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return value.replace("\n", " ")
    if kind is int and -js.MAX_SAFE < value < js.MAX_SAFE:
        return str(value)
    return _cell(value).replace("\n", " ")


def _has_astral(text: str) -> bool:
    return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def _pad_column(cells: list[str]) -> list[str]:
    """Pad every cell to the column's width (at least 3), counted in UTF-16 units."""
    if _has_astral("".join(cells)):
        width = max(3, *map(js.utf16_len, cells))
        return [cell + " " * (width - js.utf16_len(cell)) for cell in cells]
    width = max(3, *map(len, cells))
    return [cell.ljust(width) for cell in cells]


def _table_columns(items: list, columns: list[str]) -> list[list[str]]:
    out = []
    for c in columns:
        cells = [_table_cell(c)]
        cells += [_table_cell(item.get(c) if type(item) is dict else js.get_prop(item, c))
                  for item in items]
        out.append(_pad_column(cells))
    return out


def render_table(items: list) -> str:
    """The `table` renderer's text: columns when the first 20 items are all plain objects,
    else one stringified item per line; `(no results)` when empty."""
    if not items:
        return "(no results)\n"
    sample = items[:20]
    if not all(isinstance(item, dict) for item in sample):
        return "".join(_cell(item) + "\n" for item in items)
    columns = list(dict.fromkeys(key for item in sample for key in item))
    padded = _table_columns(items, columns)
    lines = ["  ".join(row) for row in zip(*padded)] if padded else [""] * (len(items) + 1)
    lines.insert(1, "  ".join("-" * js.utf16_len(column[0]) for column in padded))
    return "".join(line + "\n" for line in lines)


def render(renderer: str, items: list) -> str:
    """The text of the `json` or `table` renderer."""
    return render_json(items) if renderer == "json" else render_table(items)


def _render_plain(text: str, item: Any) -> str:
    from vm.host.commands.template import render_plain

    return render_plain(text, item)
