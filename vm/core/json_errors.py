"""JSON.parse's SyntaxError text for a text that is not JSON, worded as V8 (Node's engine)
words it, so that a message that passes the parser's text through (`exec --json could not
parse stdout as JSON: ...`, a workflow file in JSON, a damaged state value) reads as the
original's.

The rules were found by feeding Node many malformed texts (tests/machine/test_json_errors.py
keeps doing so). What decides the text:

* Where V8 stops: it reads the text once, front to back, and stops at the first character it
  cannot take. Positions count UTF-16 code units (an astral character is two).
* Why it stops. A named expectation (`Expected ':' after property name`, `Bad escaped
  character`, ...) reads `<reason> in JSON at position N`. Otherwise the character found
  decides: the end of the text is `Unexpected end of JSON input`; a digit or `-` is
  `Unexpected number in JSON at position N`; a `"` is `Unexpected string in JSON at position
  N`; any other is `Unexpected token 'c', "<text>" is not valid JSON`, where `c` is one UTF-16
  unit (half of an astral character) and a text of 21 units or more is shown as at most 10
  units either side of the position, with `...` where it was cut. The four texts JavaScript
  makes of non-JSON values (`undefined`, `NaN`, `Infinity`, `[object Object]`) are quoted
  whole: `"NaN" is not valid JSON`.
* Two quirks: a property name after a comma that lacks its colon is reported by the character
  found (only the first name gets `Expected ':' after property name`); a literal (`true`,
  `false`, `null`) is compared character by character, so `tru1` is an unexpected number.

Node 20 (V8 11) ends a position there; Node 21 and later add ` (line L column C)`, lines
split at `\\n`, `\\r` and `\\r\\n`. `LINE_COLUMN` says which this build writes: Node 20's,
the Node that runs the original beside us (the differential tests, CI).
"""

from __future__ import annotations

import re

__all__ = ["LINE_COLUMN", "json_parse_message"]

# Node 21 and later add ` (line L column C)` to a position; the oracle's Node here is 20.
LINE_COLUMN = False

# The texts JavaScript makes of values that are not JSON: V8 quotes them whole.
_JS_VALUE_TEXTS = frozenset({"undefined", "NaN", "Infinity", "[object Object]"})
_CONTEXT = 10  # units shown either side of an unexpected token, in a long text
_SHORT = 2 * _CONTEXT + 1  # a text shorter than this is shown whole

_SPACE = re.compile(r"[ \t\n\r]*")
_DIGITS = re.compile(r"[0-9]*")
_PLAIN_CHARS = re.compile(r'[^"\\\x00-\x1f]*')  # a string's characters up to a quote, an
# escape or a control character
_HEX4 = re.compile(r"[0-9A-Fa-f]{0,4}")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ESCAPES = frozenset('"\\/bfnrt')
_LITERALS = {"t": "true", "f": "false", "n": "null"}


class _Stop(Exception):
    """The parse stopped: `message` is V8's text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def json_parse_message(text: str, line_column: bool | None = None) -> str | None:
    """The message of the SyntaxError `JSON.parse(text)` throws, or None when V8 takes `text`
    as JSON. `line_column` (default LINE_COLUMN) adds Node 21's ` (line L column C)`."""
    scan = _Scan(text, LINE_COLUMN if line_column is None else line_column)
    try:
        scan.document()
    except _Stop as stop:
        return stop.message
    return None


class _Scan:
    """One pass over `text`, V8's way; `at` indexes code points (converted to UTF-16 units
    only for a message)."""

    def __init__(self, text: str, line_column: bool) -> None:
        self.text = text
        self.end = len(text)
        self.line_column = line_column
        self.at = 0

    # --- what is read ------------------------------------------------------------------

    def document(self) -> None:
        """One value and nothing but white space after it; containers are kept on a stack
        (`]` or `}` each), so any depth reads without recursion."""
        closers: list[str] = []
        while True:
            if self.value_opens(closers):
                continue
            while True:  # a value was read: what may follow it
                found = self.next_char()
                if not closers:
                    if found is not None:
                        self.stop_at("Unexpected non-whitespace character", " after JSON")
                    return
                closer = closers[-1]
                if found == ",":
                    self.at += 1
                    if closer == "}":
                        self.member_name("Expected double-quoted property name", None)
                    break
                if found != closer:
                    self.stop_at("Expected ',' or ']' after array element" if closer == "]"
                                 else "Expected ',' or '}' after property value")
                self.at += 1
                closers.pop()

    def value_opens(self, closers: list[str]) -> bool:
        """Read a value at the next token: a scalar whole (False), or the opening of a
        non-empty array or object, up to where its first value starts (True)."""
        found = self.next_char()
        if found == "[" or found == "{":
            self.at += 1
            closer = "]" if found == "[" else "}"
            if self.next_char() == closer:
                self.at += 1
                return False
            closers.append(closer)
            if closer == "}":
                self.member_name("Expected property name or '}'",
                                 "Expected ':' after property name")
            return True
        if found == '"':
            self.at += 1
            self.string()
        elif found is not None and (found == "-" or "0" <= found <= "9"):
            self.number()
        elif found in _LITERALS:
            self.literal(_LITERALS[found])
        else:
            self.unexpected()
        return False

    def member_name(self, not_a_string: str, no_colon: str | None) -> None:
        """A property name and its colon. Without `no_colon`, a missing colon is reported by
        the character found (V8 names the expectation only for an object's first name)."""
        if self.next_char() != '"':
            self.stop_at(not_a_string)
        self.at += 1
        self.string()
        if self.next_char() != ":":
            if no_colon is None:
                self.unexpected()
            self.stop_at(no_colon)
        self.at += 1

    def string(self) -> None:
        """A string's characters and its closing quote (the opening one is behind `at`)."""
        text, end = self.text, self.end
        while True:
            self.at = _PLAIN_CHARS.match(text, self.at).end()
            if self.at == end:
                self.stop_at("Unterminated string")
            char = text[self.at]
            if char == '"':
                self.at += 1
                return
            if char != "\\":
                self.stop_at("Bad control character in string literal")
            self.at += 1
            escaped = text[self.at] if self.at < end else None
            if escaped is None or escaped > "\xff":  # no escape at all: the character decides
                self.unexpected()
            if escaped == "u":
                digits = _HEX4.match(text, self.at + 1).end()
                if digits - self.at - 1 < 4:
                    self.at = digits
                    self.stop_at("Bad Unicode escape")
                self.at = digits
            elif escaped not in _ESCAPES:
                self.stop_at("Bad escaped character")
            else:
                self.at += 1

    def number(self) -> None:
        text = self.text
        if text[self.at] == "-":
            self.at += 1
        if self.char() == "0":
            self.at += 1
            if self.digit():
                self.unexpected()  # a digit after a leading zero: "Unexpected number"
        else:
            digits = _DIGITS.match(text, self.at).end()
            if digits == self.at:
                self.stop_at("No number after minus sign")
            self.at = digits
        if self.char() == ".":
            self.at += 1
            if not self.digit():
                self.stop_at("Unterminated fractional number")
            self.at = _DIGITS.match(text, self.at).end()
        if self.char() in ("e", "E"):
            self.at += 1
            if self.char() in ("-", "+"):
                self.at += 1
            if not self.digit():
                self.stop_at("Exponent part is missing a number")
            self.at = _DIGITS.match(text, self.at).end()

    def literal(self, word: str) -> None:
        """`true`, `false` or `null`, compared a character at a time after the first."""
        if self.text.startswith(word, self.at):
            self.at += len(word)
            return
        for expected in word[1:]:
            self.at += 1
            if self.char() != expected:
                self.unexpected()
        raise AssertionError("unreachable: the whole word matched")  # pragma: no cover

    # --- where it is -------------------------------------------------------------------

    def char(self) -> str | None:
        return self.text[self.at] if self.at < self.end else None

    def digit(self) -> bool:
        char = self.char()
        return char is not None and "0" <= char <= "9"

    def next_char(self) -> str | None:
        """The first character that is not JSON white space (None: the end), `at` on it."""
        self.at = _SPACE.match(self.text, self.at).end()
        return self.char()

    # --- how it is reported ------------------------------------------------------------

    def units_before(self, at: int) -> int:
        """The UTF-16 length of the text before code point `at`."""
        head = self.text[:at]
        return at + sum(1 for char in head if char > "\uffff") if not head.isascii() else at

    def stop_at(self, reason: str, where: str = " in JSON") -> None:
        """Stop with `<reason> in JSON at position N` (N in UTF-16 units)."""
        position = self.units_before(self.at)
        message = f"{reason}{where} at position {position}"
        if self.line_column:
            line, column = self.line_and_column()
            message += f" (line {line} column {column})"
        raise _Stop(message)

    def unexpected(self) -> None:
        """Stop at the character under `at`, reported by what it is."""
        char = self.char()
        if char is None:
            raise _Stop("Unexpected end of JSON input")
        if char == "-" or "0" <= char <= "9":
            self.stop_at("Unexpected number")
        if char == '"':
            self.stop_at("Unexpected string")
        if self.text in _JS_VALUE_TEXTS:
            raise _Stop(f'"{self.text}" is not valid JSON')
        raise _Stop(self.token_message())

    def token_message(self) -> str:
        """`Unexpected token 'c', "<the text, or 10 units either side>" is not valid JSON`."""
        position = self.units_before(self.at)
        units = self.text.encode("utf-16-le", "surrogatepass")
        length = len(units) // 2

        def piece(start: int, stop: int) -> str:
            return units[2 * start:2 * stop].decode("utf-16-le", "surrogatepass")

        token = piece(position, position + 1)  # one unit: half of an astral character
        if length < _SHORT:
            shown = f'"{piece(0, length)}"'
        elif position < _CONTEXT:
            shown = f'"{piece(0, position + _CONTEXT)}"...'
        elif position < length - _CONTEXT:
            shown = f'..."{piece(position - _CONTEXT, position + _CONTEXT)}"...'
        else:
            shown = f'..."{piece(position - _CONTEXT, length)}"'
        return f"Unexpected token '{token}', {shown} is not valid JSON"

    def line_and_column(self) -> tuple[int, int]:
        """Node 21's line and column of the stop, from 1: `\\r\\n` is one break, and so are a
        lone `\\r` and a lone `\\n`; the column counts UTF-16 units."""
        head = self.text[:self.at]
        line_start = max(head.rfind("\n"), head.rfind("\r")) + 1
        line = len(_LINE_BREAK.findall(head)) + 1
        return line, self.units_before(self.at) - self.units_before(line_start) + 1
