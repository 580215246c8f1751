"""Pipeline text -> ast.Pipeline, with the cached Lark parser; syntax errors -> Diagnostics."""

from __future__ import annotations

from functools import lru_cache

from lobsterc.syntax import ast
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax.source import Source, Span

DQ_ESCAPES = {'"', "\\", "$", "`"}


@lru_cache(maxsize=1)
def _parser():
    from lark import Lark

    from lobsterc.syntax import grammars

    grammar = grammars.text("pipeline.lark")
    return Lark(grammar, start="pipeline", parser="lalr", maybe_placeholders=True)


def decode_word(raw: str) -> tuple[str, bool]:
    """The text a WORD token stands for, and whether any part of it was quoted."""
    text, quoted, _ = decode_word_offsets(raw)
    return text, quoted


def decode_word_offsets(raw: str) -> tuple[str, bool, list[int]]:
    """decode_word, and for each character of the text the offset in `raw` it came from."""
    out: list[str] = []
    at: list[int] = []
    quoted = False
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == "'":
            quoted = True
            i += 1
            while raw[i] != "'":
                if raw[i] == "\\" and raw[i + 1] == "'":
                    out.append("'")
                    at.append(i + 1)
                    i += 2
                else:
                    out.append(raw[i])
                    at.append(i)
                    i += 1
            i += 1
        elif ch == '"':
            quoted = True
            i += 1
            while raw[i] != '"':
                if raw[i] == "\\":
                    nxt = raw[i + 1]
                    if nxt in DQ_ESCAPES:
                        out.append(nxt)
                        at.append(i + 1)
                    elif nxt != "\n":
                        out.append("\\" + nxt)
                        at.extend((i, i + 1))
                    i += 2
                else:
                    out.append(raw[i])
                    at.append(i)
                    i += 1
            i += 1
        elif ch == "\\" and raw.startswith("\n", i + 1):  # a line continuation: removed
            i += 2
        else:
            out.append(ch)
            at.append(i)
            i += 1
    return "".join(out), quoted, at


def parse_pipeline(text: str, name: str = "<pipeline>") -> ast.Pipeline:
    """Parse a pipeline string. Raises CompileError (E1xx, a parse_error) on bad syntax."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput

    source = Source(name, text)
    if not text.strip():
        raise _error(source, "E101", "Empty pipeline", 0, len(text))
    try:
        tree = _parser().parse(text)
    except UnexpectedCharacters as exc:
        pos = exc.pos_in_stream
        code, message = ("E102", "Unclosed quote") if text[pos] in "'\"" else (
            "E104", f"Unexpected character {text[pos]!r}")
        raise _error(source, code, message, pos, len(text)) from None
    except UnexpectedInput as exc:  # pragma: no cover - the grammar accepts any token order
        raise _error(source, "E104", "Invalid pipeline", getattr(exc, "pos_in_stream", 0) or 0,
                     len(text)) from None
    pipeline = _build(source, tree)
    if not pipeline.stages:  # only whitespace and line continuations
        raise _error(source, "E101", "Empty pipeline", 0, len(text))
    return pipeline


def _build(source: Source, tree) -> ast.Pipeline:
    stages: list[ast.Stage] = []
    slots: list = []  # a stage Tree, or the PIPE token that follows an empty slot
    pending_empty = True
    for child in tree.children:
        if child is None:
            continue
        if getattr(child, "type", None) == "PIPE":
            if pending_empty:
                slots.append(child)
            pending_empty = True
        else:
            slots.append(child)
            pending_empty = False
    for slot in slots:
        if getattr(slot, "type", None) == "PIPE":
            raise _error(source, "E103", "Empty command stage", slot.start_pos, slot.end_pos)
        words = [_word(source.name, tok) for tok in slot.children]
        span = Span(source.name, words[0].span.line, words[0].span.col,
                    words[-1].span.end_line, words[-1].span.end_col)
        stages.append(ast.Stage(name=words[0], words=tuple(words[1:]), span=span))
    return ast.Pipeline(stages=tuple(stages), span=source.span(0, len(source.text)))


def _word(name: str, tok) -> ast.Word:
    raw = str(tok)
    plain = "'" not in raw and '"' not in raw and "\\\n" not in raw
    text, quoted = (raw, False) if plain else decode_word(raw)
    # Lark counts lines and columns as Source does (1-based, "\n" ends a line)
    return ast.Word(text, quoted, Span(name, tok.line, tok.column, tok.end_line, tok.end_column))


def _error(source: Source, code: str, message: str, start: int, end: int) -> CompileError:
    diag = Diagnostic(code=code, message=message, span=source.span(start, end))
    return CompileError([diag], source)
