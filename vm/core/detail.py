"""The detail of an error: what helps fix the input, kept apart from the message (which stays
the original's) and carried in the envelope's additive `error.detail` and in human mode's
extra lines. JSON positions and output excerpts live here; allowed enum values come from
vm/core/schema.py."""

from __future__ import annotations

import json

EXCERPT_CHARS = 200  # how much of an unparseable text `detail.excerpt` shows


def json_detail(exc: BaseException | None) -> dict | None:
    """Where JSON text stopped parsing: line and column (from 1), the offending character
    (None: the text ended there) and the parser's reason; None for an error without a
    position (a NaN literal, a value that was not text)."""
    if not isinstance(exc, json.JSONDecodeError):
        return None
    char = exc.doc[exc.pos] if exc.pos < len(exc.doc) else None
    return {"line": exc.lineno, "column": exc.colno, "char": char, "reason": exc.msg}


def excerpt_detail(text: str, exc: BaseException | None) -> dict:
    """`json_detail` and a glimpse of the text that was not JSON: its first EXCERPT_CHARS
    characters and its length."""
    detail: dict = {"excerpt": text[:EXCERPT_CHARS], "chars": len(text)}
    detail.update(json_detail(exc) or {})
    return detail
