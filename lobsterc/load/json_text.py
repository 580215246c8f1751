"""JSON text -> plain data with positions: a small scanner that keeps offsets; json.loads decodes
each string and number."""

from __future__ import annotations

import json
import re
from typing import Any

from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.load.document import (MAX_NESTING, OffsetSpans, OverLimit, ParseError, Path,
                                     load_error, too_deep)
from vm.core import json_read
from lobsterc.syntax.source import Source

_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_JSON_WORDS = {"true": True, "false": False, "null": None}


def parse_json(source: Source) -> tuple[Any, OffsetSpans, OffsetSpans]:
    scanner = _JsonScanner(source.text)
    try:
        data = scanner.document()
    except OverLimit as exc:
        raise load_error(source, exc) from None
    except ParseError as exc:
        raise json_syntax_error(source, exc) from None
    except RecursionError:
        raise load_error(source, too_deep(scanner.pos)) from None
    return data, OffsetSpans(source, scanner.spans), OffsetSpans(source, scanner.key_spans)


def json_syntax_error(source: Source, exc: ParseError) -> CompileError:
    """A JSON workflow file that does not parse: the message is JSON.parse's own (the original
    passes it on bare); the span is where the scanner stopped, and its reason, where it says
    more, is the help."""
    from vm.core.json_errors import json_parse_message

    message = json_parse_message(source.text)
    if message is None:  # pragma: no cover - the scanner refuses only what JSON.parse refuses
        return load_error(source, exc)
    span = source.span(exc.offset, exc.offset + 1)
    reason = None if exc.what.lower() in message.lower() else exc.what
    return CompileError([Diagnostic(code="E210", message=message, span=span, help=reason)],
                        source)


class _JsonScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0  # a byte order mark is no JSON white space: JSON.parse refuses it
        self.spans: dict[Path, tuple[int, int]] = {}
        self.key_spans: dict[Path, tuple[int, int]] = {}

    def document(self) -> Any:
        value = self.value(())
        self.skip()
        if self.pos < len(self.text):
            raise ParseError(f"unexpected {self.text[self.pos]!r} after the JSON value", self.pos)
        return value

    def skip(self) -> None:
        self.pos = _JSON_WS.match(self.text, self.pos).end()

    def value(self, path: Path) -> Any:
        self.skip()
        start = self.pos
        if len(path) > MAX_NESTING:
            raise too_deep(start)
        ch = self.text[start : start + 1]
        if ch == "{":
            value: Any = self.obj(path)
        elif ch == "[":
            value = self.array(path)
        elif ch == '"':
            value = self.string()
        else:
            value = self.scalar()
        self.spans[path] = (start, self.pos)
        return value

    def obj(self, path: Path) -> dict:
        out: dict[str, Any] = {}
        self.pos += 1
        self.skip()
        if self.peek("}"):
            return out
        while True:
            self.skip()
            if not self.text.startswith('"', self.pos):
                raise ParseError("expected a property name in double quotes", self.pos)
            key_start = self.pos
            key = self.string()
            self.key_spans[path + (key,)] = (key_start, self.pos)
            self.skip()
            if not self.peek(":"):
                raise ParseError("expected ':' after a property name", self.pos)
            out[key] = self.value(path + (key,))  # a repeated key: the last one wins, as in JSON.parse
            self.skip()
            if self.peek("}"):
                return out
            if not self.peek(","):
                raise ParseError("expected ',' or '}' in an object", self.pos)

    def array(self, path: Path) -> list:
        out: list[Any] = []
        self.pos += 1
        self.skip()
        if self.peek("]"):
            return out
        while True:
            out.append(self.value(path + (len(out),)))
            self.skip()
            if self.peek("]"):
                return out
            if not self.peek(","):
                raise ParseError("expected ',' or ']' in an array", self.pos)

    def peek(self, ch: str) -> bool:
        if self.text.startswith(ch, self.pos):
            self.pos += 1
            return True
        return False

    def string(self) -> str:
        match = _JSON_STRING.match(self.text, self.pos)
        if match is None:
            raise ParseError("unterminated or invalid string", self.pos)
        self.pos = match.end()
        return json.loads(match.group())

    def scalar(self) -> Any:
        if self.pos >= len(self.text):
            raise ParseError("unexpected end of JSON input", self.pos)
        for word, value in _JSON_WORDS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        match = _JSON_NUMBER.match(self.text, self.pos)
        if match is None:
            raise ParseError(f"unexpected token {self.text[self.pos]!r}", self.pos)
        self.pos = match.end()
        return json_read.json_loads(match.group())  # as JSON.parse: a 400-digit integer is a float

