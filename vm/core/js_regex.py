"""JavaScript regular expressions in `u` mode, as Python `re` patterns: what the original's Ajv
makes of a schema's `pattern` and `patternProperties` keys (`new RegExp(p, "u")`, `.test()`).

`translate(source)` parses the source with ECMAScript's `u`-mode grammar and writes a Python
pattern of the same meaning, or raises `JsRegexSyntaxError` with V8's reason where `new RegExp`
throws (`\\a`, `\\-` outside a class, a lone `{`, `(?P<n>`, `a*+`, ...).
`compiled(source)` is the cached `re.Pattern`; `test(source, text)` is `.test()`.

What differs from Python's reading and is translated: `\\d` `\\w` `\\b` are ASCII; `\\s` is
JavaScript's white space (vm.core.js.JS_WHITESPACE); `.` is anything but \\n \\r \\u2028 \\u2029;
`^` and `$` hold only at the ends (no `m` flag); `[]` matches nothing and `[^]` anything;
`\\uD83D\\uDE00`, `\\u{1F600}` and astral literals are one character; a back reference to a
group that has not matched (or is still open, or comes later) matches the empty string;
`(?<name>...)` and `\\k<name>` take JavaScript's identifier names.

`\\p{..}`/`\\P{..}` take the sets of vm.core.js_unicode (General_Category in every spelling,
a few binary properties, common scripts); the properties valid in JavaScript it does not build
(most binary ones, other scripts) raise `JsRegexUnsupported`, as do a look-behind whose
alternatives are not each of a fixed width (Python's limit) and a back reference inside a
look-behind. Not reproduced: JavaScript clears a quantified group's captures at each iteration,
Python keeps the last ones, so a back reference after such a group can differ.
"""

from __future__ import annotations

import re
from functools import lru_cache

from vm.core.js import JS_WHITESPACE
from vm.core.js_unicode import UnsupportedProperty, complement as _complement
from vm.core.js_unicode import normal as _normal, property_ranges

__all__ = ["JsRegexSyntaxError", "JsRegexUnsupported", "compiled", "test", "translate"]

_MAX = 0x10FFFF
_MAXREPEAT = 4294967294  # Python's largest bound; a larger JavaScript bound is unbounded here
_SYNTAX = set("^$\\.*+?()[]{}|")
_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_DIGIT = _WORD[:1]
_SPACE = [(ord(c), ord(c)) for c in JS_WHITESPACE]
_BOUNDARY = {"b": r"(?:(?<=[0-9A-Z_a-z])(?![0-9A-Z_a-z])|(?<![0-9A-Z_a-z])(?=[0-9A-Z_a-z]))",
             "B": r"(?:(?<=[0-9A-Z_a-z])(?=[0-9A-Z_a-z])|(?<![0-9A-Z_a-z])(?![0-9A-Z_a-z]))"}
_DOT = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]  # what `.` does not match


class JsRegexSyntaxError(ValueError):
    """Where `new RegExp(source, "u")` throws: the message is V8's."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"Invalid regular expression: /{source}/u: {reason}")
        self.reason = reason


class JsRegexUnsupported(ValueError):
    """A regex JavaScript reads that this translation does not (see the module's list)."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"Unsupported regular expression: /{source}/u: {reason} (valid "
                         "JavaScript that ours cannot apply)")
        self.reason = reason


def _char(cp: int) -> str:
    if cp < 0x80 and chr(cp).isalnum():
        return chr(cp)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _class(ranges) -> str:
    ranges = _normal(ranges)
    if not ranges:
        return "(?!)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    return "[" + "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}"
                         for lo, hi in ranges) + "]"


# ---- the parser --------------------------------------------------------------------------

def _number(digits: str) -> int:
    return int(digits) if len(digits) < 16 else 10 ** 16  # beyond any bound or group count


def _id_char(c: str, first: bool) -> bool:
    if c in "$_":
        return True
    if first:
        return c.isidentifier()
    return ("a" + c).isidentifier() or c in "\u200c\u200d"


class _Parser:
    def __init__(self, source: str) -> None:
        self.src, self.pos = source, 0
        self.names: dict[str, int] = {}  # group name -> number, from a first scan
        self.count = self._scan_groups()
        self.opened = 0   # groups opened so far
        self.closed: set[int] = set()
        self.behind = 0   # depth of look-behinds around the cursor

    def fail(self, reason: str):
        raise JsRegexSyntaxError(self.src, reason)

    def peek(self, k: int = 0) -> str:
        return self.src[self.pos + k] if self.pos + k < len(self.src) else ""

    def eat(self, text: str) -> bool:
        if self.src.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    def _scan_groups(self) -> int:
        """The number of capturing groups and their names (a reference may precede its group)."""
        src, i, count, in_class = self.src, 0, 0, False
        while i < len(src):
            c = src[i]
            if c == "\\":
                i += 1
            elif in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
            elif c == "(":
                if not src.startswith("?", i + 1):
                    count += 1
                elif src.startswith("?<", i + 1) and src[i + 3:i + 4] not in ("=", "!"):
                    count += 1
                    save, self.pos = self.pos, i + 3
                    try:
                        name = self._group_name()
                    except JsRegexSyntaxError:
                        name = None
                    self.pos = save
                    if name is not None:
                        if name in self.names:
                            self.fail("Duplicate capture group name")
                        self.names[name] = count
            i += 1
        return count

    def _group_name(self) -> str:
        """A RegExpIdentifierName up to its `>` (the cursor is after the `<`)."""
        out = []
        while True:
            c = self.peek()
            if c == ">" and out:
                self.pos += 1
                return "".join(out)
            if c == "\\" and self.peek(1) == "u":
                self.pos += 2
                cp = self._unicode_escape_body()
                c = chr(cp) if cp is not None else ""
                self.pos -= 1
            if not c or not _id_char(c, not out):
                self.fail("Invalid capture group name")
            out.append(c)
            self.pos += 1

    # Disjunction and terms -------------------------------------------------------------

    def disjunction(self) -> list[str]:
        alternatives = [self.alternative()]
        while self.eat("|"):
            alternatives.append(self.alternative())
        return alternatives

    def alternative(self) -> str:
        out = []
        while self.pos < len(self.src) and self.peek() not in "|)":
            out.append(self.term())
        return "".join(out)

    def term(self) -> str:
        c = self.peek()
        if c == "^":
            self.pos += 1
            return self._no_quantifier(r"\A")
        if c == "$":
            self.pos += 1
            return self._no_quantifier(r"\Z")
        if c == "\\" and self.peek(1) in ("b", "B"):
            self.pos += 2
            return self._no_quantifier(_BOUNDARY[self.src[self.pos - 1]])
        look = re.compile(r"\(\?<?[=!]").match(self.src, self.pos)
        if not look:
            return self._quantified(self.atom())
        self.pos, kind, behind = look.end(), look.group()[2:], look.group()[2] == "<"
        self.behind += behind
        alternatives = self.disjunction()
        self.behind -= behind
        self._close()
        if kind == "<=":  # Python's look-behinds are of one width: one per alternative
            text = "|".join(f"(?<={a})" for a in alternatives)
            text = f"(?:{text})" if len(alternatives) > 1 else text
        elif kind == "<!":
            text = "".join(f"(?<!{a})" for a in alternatives)
        else:
            text = f"(?{kind}{'|'.join(alternatives)})"
        return self._no_quantifier(text, "Invalid quantifier")

    def _close(self) -> None:
        self.eat(")") or self.fail("Unterminated group")

    def _no_quantifier(self, text: str, reason: str = "Nothing to repeat") -> str:
        if self.peek() in ("*", "+", "?") or self._bounds(peek=True):
            self.fail(reason)
        return text

    def _bounds(self, peek: bool = False):
        """`{n}`, `{n,}` or `{n,m}` at the cursor as (n, m or None), else None."""
        m = re.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.src, self.pos)
        if m is None:
            return None
        if not peek:
            self.pos = m.end()
        low = _number(m.group(1))
        return low, low if m.group(2) is None else _number(m.group(3)) if m.group(3) else None

    def _quantified(self, atom: str) -> str:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.pos += 1
            quantifier = c
        elif c == "{":
            bounds = self._bounds()
            if bounds is None:
                self.fail("Incomplete quantifier")
            low, high = bounds
            if high is not None and high < low:
                self.fail("numbers out of order in {} quantifier")
            low = min(low, _MAXREPEAT)
            high = None if high is None or high > _MAXREPEAT else high
            quantifier = "{%d,%s}" % (low, "" if high is None else high)
        else:
            return atom
        quantifier += "?" if self.eat("?") else ""
        return self._no_quantifier(atom + quantifier)

    def atom(self) -> str:
        c = self.peek()
        self.pos += 1
        if c == ".":
            return _class(_complement(_DOT))
        if c == "[":
            return self.char_class()
        if c == "(":
            return self.group()
        if c == "\\":
            return self.atom_escape()
        if c in ("*", "+", "?"):
            self.fail("Nothing to repeat")
        if c == "{":
            self.pos -= 1
            self.fail("Nothing to repeat" if self._bounds(peek=True) else "Lone quantifier "
                      "brackets")
        if c in ("}", "]"):
            self.fail("Lone quantifier brackets")
        return _char(ord(c))

    def group(self) -> str:
        plain = self.eat("?:")
        if not plain and self.peek() == "?":
            self.eat("?<") or self.fail("Invalid group")
            self._group_name()  # checked; its number is known from the first scan
        if not plain:
            self.opened += 1
            number = self.opened
        body = "|".join(self.disjunction())
        self._close()
        if plain:
            return f"(?:{body})"
        self.closed.add(number)
        return f"(?P<_{number}>{body})"

    def _reference(self, number: int) -> str:
        if self.behind:
            raise JsRegexUnsupported(self.src, "a back reference in a look-behind is not supported")
        if number not in self.closed:  # still open, or later: undefined, matches ""
            return "(?:)"
        return f"(?:(?(_{number})(?P=_{number})))"

    def atom_escape(self) -> str:
        c = self.peek()
        if not c:
            self.fail("\\ at end of pattern")
        if c in "123456789":
            m = re.compile(r"[0-9]+").match(self.src, self.pos)
            number = _number(m.group())
            if number > self.count:
                self.fail("Invalid escape")
            self.pos = m.end()
            return self._reference(number)
        if c == "k":
            self.pos += 1
            if not self.eat("<"):
                self.fail("Invalid named reference")
            name = self._group_name()
            if name not in self.names:
                self.fail("Invalid named capture referenced")
            return self._reference(self.names[name])
        found = self.class_escape(in_class=False)
        return _class(found) if isinstance(found, list) else _char(found)

    def class_escape(self, in_class: bool):
        """The escape after a `\\`: a code point, or a class's ranges."""
        c = self.peek()
        self.pos += 1
        if c in "dDwWsS":
            ranges = {"d": _DIGIT, "w": _WORD, "s": _SPACE}[c.lower()]
            return _complement(ranges) if c.isupper() else ranges
        if c in ("p", "P"):
            m = re.compile(r"\{([A-Za-z0-9_=]*)\}").match(self.src, self.pos)
            try:
                ranges = property_ranges(m.group(1)) if m else None
            except UnsupportedProperty as exc:
                raise JsRegexUnsupported(self.src, str(exc)) from None
            if ranges is None:
                self.fail("Invalid property name" if not in_class
                          else "Invalid property name in character class")
            self.pos = m.end()
            return _complement(ranges) if c == "P" else list(ranges)
        if c in _CONTROL:
            return _CONTROL[c]
        if c == "c":
            letter = self.peek()
            if letter.isascii() and letter.isalpha():
                self.pos += 1
                return ord(letter) % 32
            self.fail("Invalid Unicode escape")
        if c == "0" and not self.peek().isdigit():
            return 0
        if c == "x":
            m = re.compile(r"[0-9A-Fa-f]{2}").match(self.src, self.pos)
            if not m:
                self.fail("Invalid escape")
            self.pos = m.end()
            return int(m.group(), 16)
        if c == "u":
            cp = self._unicode_escape_body()
            if cp is None:
                self.fail("Invalid Unicode escape")
            return cp
        if c in _SYNTAX or c == "/" or (in_class and c == "-"):
            return ord(c)
        if in_class and c == "b":
            return 8
        if c == "0" or (in_class and c in "1234567"):
            self.fail("Invalid class escape" if in_class else "Invalid decimal escape")
        self.fail("Invalid escape")

    def _unicode_escape_body(self) -> int | None:
        """After `\\u`: XXXX (a surrogate pair of two escapes is one code point) or {X...}."""
        m = re.compile(r"\{([0-9A-Fa-f]+)\}|[0-9A-Fa-f]{4}").match(self.src, self.pos)
        if not m:
            return None
        if m.group(1) is not None:
            cp = int(m.group(1), 16)
            if cp > _MAX:
                return None
            self.pos = m.end()
            return cp
        cp = int(m.group(), 16)
        self.pos = m.end()
        if 0xD800 <= cp <= 0xDBFF:
            low = re.compile(r"\\u([dD][c-fC-F][0-9A-Fa-f]{2})").match(self.src, self.pos)
            if low:
                self.pos = low.end()
                return 0x10000 + ((cp - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
        return cp

    def char_class(self) -> str:
        negate = self.eat("^")
        ranges: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.src):
                self.fail("Unterminated character class")
            if self.eat("]"):
                break
            low = self._class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self._class_atom()
                if not isinstance(low, int) or not isinstance(high, int):
                    self.fail("Invalid character class")
                if low > high:
                    self.fail("Range out of order in character class")
                ranges.append((low, high))
            elif isinstance(low, int):
                ranges.append((low, low))
            else:
                ranges.extend(low)
        return _class(_complement(ranges) if negate else ranges)

    def _class_atom(self):
        """A code point, or the ranges of a class escape."""
        c = self.peek()
        if not c:
            self.fail("Unterminated character class")
        self.pos += 1
        if c != "\\":
            return ord(c)
        if not self.peek():
            self.fail("\\ at end of pattern")
        return self.class_escape(in_class=True)


@lru_cache(maxsize=256)
def translate(source: str) -> str:
    """The Python pattern of the JavaScript `u`-mode regex `source`."""
    parser = _Parser(source)
    text = "|".join(parser.disjunction())
    if parser.pos < len(source):  # only a `)` stops the top level early
        parser.fail("Unmatched ')'")
    return text


@lru_cache(maxsize=256)
def compiled(source: str) -> re.Pattern:
    """`new RegExp(source, "u")` as a compiled Python pattern."""
    text = translate(source)
    try:
        return re.compile(text)
    except re.error as exc:  # what JavaScript reads and Python's engine cannot
        reason = "a look-behind of varying width" if "look-behind" in exc.msg else exc.msg
        raise JsRegexUnsupported(source, f"{reason} is not supported") from None


def test(source: str, text: str) -> bool:
    """`new RegExp(source, "u").test(text)`."""
    return compiled(source).search(text) is not None
