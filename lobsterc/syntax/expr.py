"""`when`/`condition` values -> plain-data condition trees (grammar/expr.lark), with E212 errors,
and a tree back to its text (condition_text). The tree is stored in bytecode and evaluated by
vm.core.condition; see compile_condition for its shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax.source import Span
from vm.core import json_write

__all__ = ["compile_condition", "condition_refs", "tree_refs", "MAX_DEPTH"]

MAX_DEPTH = 200  # nesting limit, so evaluation can never exhaust the Python stack

_parser: Any = None


def _get_parser() -> Any:
    global _parser
    if _parser is None:
        from lark import Lark

        from lobsterc.syntax import grammars

        text = grammars.text("expr.lark")
        _parser = Lark(text, parser="lalr", maybe_placeholders=False)
    return _parser


def compile_condition(value: Any, span: Span | None) -> Any:
    """Compile a step's `when`/`condition` value into a plain-data tree:

        ["const", bool]                  absent/None (True), a boolean, "true"/"false"
        ["or", a, b] / ["and", a, b]     both sides always evaluated
        ["not", a]
        ["cmp", op, left, right]         op in == != < <= > >=
        ["ref", step_id, [segment, ...]] $step_id.seg.seg
        ["lit", value]                   string, number, true/false/null, bare identifier

    `span` is where the value sits in its file. Raises CompileError (E212) with the
    reference's texts: `Unsupported condition type` or `Unsupported condition: <expr>`."""
    if value is None:
        return ["const", True]
    if isinstance(value, bool):
        return ["const", value]
    if not isinstance(value, str):
        raise _error("Unsupported condition type", span)
    trimmed = value.strip()
    if trimmed == "true":
        return ["const", True]
    if trimmed == "false":
        return ["const", False]
    from lark.exceptions import LarkError

    try:
        tree = _get_parser().parse(trimmed)
    except LarkError as exc:
        lead = len(value) - len(value.lstrip())
        where, width = _error_offset(exc, trimmed)
        raise _error(f"Unsupported condition: {trimmed}", _sub_span(span, value, lead + where, width))
    try:
        return _build(tree.children[0], 0)
    except _TooDeep:
        raise _error(f"Unsupported condition: {trimmed} (nested deeper than {MAX_DEPTH})", span)


def tree_refs(tree: Any) -> Iterator[tuple[str, list[str]]]:
    """(step id, path) of every reference in a compiled condition, left to right."""
    stack = [tree]
    while stack:
        node = stack.pop()
        tag = node[0]
        if tag == "ref":
            yield node[1], node[2]
        elif tag in ("or", "and"):
            stack.extend((node[2], node[1]))
        elif tag == "not":
            stack.append(node[1])
        elif tag == "cmp":
            stack.extend((node[3], node[2]))


def condition_refs(tree: Any) -> list[str]:
    """The step ids a compiled condition references, in order of first appearance."""
    return list(dict.fromkeys(step for step, _ in tree_refs(tree)))


class _TooDeep(Exception):
    pass


def _build(node: Any, depth: int) -> Any:
    """lark Tree -> plain data, one branch per grammar alias."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    kind = node.data
    kids = node.children
    if kind == "or_":
        return ["or", _build(kids[0], depth + 1), _build(kids[1], depth + 1)]
    if kind == "and_":
        return ["and", _build(kids[0], depth + 1), _build(kids[1], depth + 1)]
    if kind == "not_":
        return ["not", _build(kids[0], depth + 1)]
    if kind == "cmp":
        return ["cmp", str(kids[1]), _build(kids[0], depth + 1), _build(kids[2], depth + 1)]
    if kind == "ref":
        step_id, *path = str(kids[0])[1:].split(".")
        return ["ref", step_id, path]
    if kind == "string":
        return ["lit", _unquote(str(kids[0]))]
    if kind == "number":
        return ["lit", _number(str(kids[0]))]
    if kind == "ident":
        return ["lit", str(kids[0])]
    if kind in ("true", "false", "null"):
        return ["lit", {"true": True, "false": False, "null": None}[kind]]
    raise NotImplementedError(f"no builder for grammar rule {kind!r}")


def _unquote(token: str) -> str:
    """Strip the quotes; a backslash makes the next character literal, whatever it is."""
    out: list[str] = []
    chars = iter(token[1:-1])
    for ch in chars:
        out.append(next(chars, "") if ch == "\\" else ch)
    return "".join(out)


def _number(token: str) -> int | float:
    """A JavaScript number: -0 stays distinct from 0; integers beyond 2**53 become floats."""
    if "." in token or token.strip("-0") == "" and token.startswith("-"):
        return float(token)
    if len(token.lstrip("-")) > 16:
        return float(token)  # past 2**53 anyway; and int() refuses thousands of digits
    value = int(token)
    return value if abs(value) <= 2**53 else float(value)


def _error_offset(exc: Exception, text: str) -> tuple[int, int]:
    """0-based offset in `text` and width of the offending token."""
    token = getattr(exc, "token", None)
    if token is not None:
        if token.type == "$END":
            return len(text), 1
        return token.start_pos or 0, max(1, len(str(token)))
    pos = getattr(exc, "pos_in_stream", None)
    return (pos if isinstance(pos, int) else 0), 1


def _sub_span(span: Span | None, value: str, offset: int, width: int) -> Span | None:
    """The span of `value[offset:offset+width]` when `span` holds the value on one line."""
    if span is None or span.line != span.end_line or "\n" in value:
        return span
    extent = span.end_col - span.col
    quote = 1 if extent == len(value) + 2 else 0  # a quoted scalar: skip its opening quote
    if extent not in (len(value), len(value) + 2):
        return span  # escapes or folding: columns inside the value are not source columns
    col = span.col + quote + offset
    return Span(span.source, span.line, col, span.line, col + width)


def _error(message: str, span: Span | None) -> CompileError:
    return CompileError([Diagnostic(code="E212", message=message, span=span)])


def condition_text(tree: Any) -> str | None:
    """A compiled condition (vm.core.condition's tree) as the condition language writes it."""
    if tree is None:
        return None

    def text(node: Any, outer: int = 0) -> str:
        tag = node[0] if isinstance(node, list) and node else None
        if tag in ("const", "lit"):
            return json_write.json_compact(node[1])
        if tag == "ref":
            return "$" + ".".join([str(node[1]), *map(str, node[2])])
        if tag == "not":
            return "!" + text(node[1], 3)
        if tag in ("and", "or"):
            rank = 1 if tag == "or" else 2
            inner = f"{text(node[1], rank)} {'&&' if tag == 'and' else '||'} {text(node[2], rank)}"
            return f"({inner})" if outer > rank else inner
        if tag == "cmp":
            inner = f"{text(node[2], 3)} {node[1]} {text(node[3], 3)}"
            return f"({inner})" if outer >= 3 else inner
        return json_write.json_compact(node)

    return text(tree)
