"""JavaScript regular expressions in `u` mode, as the original's Ajv reads a schema's `pattern`
and `patternProperties` keys (`new RegExp(p, "u")`, then `.test()`): the `regress` package
(an ECMAScript regex engine) runs them; this module owns the words.

`compiled(source)` is the cached `regress.Regex`, or raises `JsRegexSyntaxError` with the
reason V8 (Node 20, the original's engine) gives where `new RegExp` throws. regress's errors
are coarser than V8's, so `_REASONS` maps each to V8's text, and `_first_bad_escape` tells
apart the five texts V8 has for what regress calls an invalid escape. Three forms regress
accepts and Node 20 refuses are refused first (`_node_20_refuses`): a group modifier
`(?i:..)`, a capture name used twice (also in different alternatives), a quantified `\\b`
(when such a form comes before another error, V8 names it and this module the other; so too
for a duplicate capture name, which regress finds before any other error).
`test(source, text)` is `.test()`; a lone surrogate in `text` (not encodable for the engine)
is read as U+FFFD.
"""

from __future__ import annotations

import re
from functools import lru_cache

import regress

__all__ = ["JsRegexSyntaxError", "compiled", "test"]


class JsRegexSyntaxError(ValueError):
    """Where `new RegExp(source, "u")` throws: the message is V8's."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"Invalid regular expression: /{source}/u: {reason}")
        self.reason = reason


# regress's error text (its start) -> V8's reason; a callable where V8 says one of several
# things for what regress reports as one, decided from the source.
def _escape_reason(source: str) -> str:
    return _first_bad_escape(source) or "Invalid escape"


def _paren_reason(source: str) -> str:
    depth = 0
    for token, _ in _tokens(source):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth < 0:
                return "Unmatched ')'"
    return "Unterminated group"


def _repeat_reason(source: str, otherwise: str) -> str:
    return _repeat_at(source, otherwise)[0]


def _repeat_at(source: str, otherwise: str) -> tuple[str, int]:
    """V8's reason for the first quantifier that has nothing (quantifiable) before it, or for
    a lone `{`, `}` or `]`, and where it is: `otherwise` when there is none."""
    before, stack = "", []  # before: what the next quantifier would repeat
    for kind, m in _tokens(source):
        text = m.group()
        if kind == "q":
            if before == "quantified" and text == "?":
                before = "done"  # a lazy quantifier's `?`
                continue
            if before in ("", "(", "|", "quantified", "done", "assertion"):
                return "Nothing to repeat", m.start()
            if before == "look":
                return "Invalid quantifier", m.start()
            before = "quantified"
        elif kind in ("{", "}", "]"):
            return ("Incomplete quantifier" if kind == "{" and before == "atom"
                    else "Lone quantifier brackets"), m.start()
        elif kind == "(":
            stack.append(text in ("(?=", "(?!", "(?<=", "(?<!"))
            before = "("
        elif kind == ")":
            before = "look" if stack and stack.pop() else "atom"
        elif kind == "|":
            before = "|"
        elif kind != "class":
            before = "assertion" if text in ("^", "$", "\\b", "\\B") else "atom"
    return otherwise, len(source)


def _quantifier_reason(source: str, otherwise: str = "Incomplete quantifier") -> str:
    reason, at = _repeat_at(source, otherwise)
    for kind, m in _tokens(source):
        bounds = re.fullmatch(r"\{([0-9]+),([0-9]+)\}", m.group()) if kind == "q" else None
        if bounds and int(bounds.group(2)) < int(bounds.group(1)) and (
                m.start() < at or m.start() == at and reason == "Invalid quantifier"):
            return "numbers out of order in {} quantifier"
    return reason


def _range_reason(source: str) -> str:
    return "Range out of order in character class"


def _property_reason(source: str) -> str:
    for token, m in _tokens(source):
        if token in ("atom", "class") and m.group().startswith(("\\p", "\\P")):
            return "Invalid property name in character class" if m.re is _CLASS_TOKEN \
                else "Invalid property name"
    return "Invalid property name"


_REASONS = {
    "Invalid character escape": _escape_reason,
    "Invalid unicode escape": "Invalid Unicode escape",
    "Incomplete escape": "\\ at end of pattern",
    "Unbalanced parenthesis": _paren_reason,
    "Unbalanced bracket": "Unterminated character class",
    "Invalid atom character": lambda s: _repeat_reason(s, "Nothing to repeat"),
    "Invalid quantifier": _quantifier_reason,
    "Quantifier not allowed here": lambda s: _quantifier_reason(s, "Invalid quantifier"),
    "Range values reversed": _range_reason,
    "Invalid character range": "Invalid character class",
    "Invalid property name": _property_reason,
    "Invalid character at property escape start": "Invalid property name",
    "Duplicate capture group name": "Duplicate capture group name",
    "Backreference to invalid named capture group": "Invalid named capture referenced",
    "Invalid named backreference syntax": lambda s: "Invalid capture group name"
    if "\\k<" in s else "Invalid named reference",
    "Invalid token at named capture group identifier": lambda s: "Invalid capture group name"
    if "(?<" in s else "Invalid group",
    "Invalid group modifier": "Invalid group",
}


def _reason(source: str, error: str) -> str:
    for start, reason in _REASONS.items():
        if error.startswith(start):
            return reason if isinstance(reason, str) else reason(source)
    return error  # regress's own words for what V8 has no text of ours


# ---- a light scan of the source: tokens outside and inside classes -------------------------

_BOUNDS = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_TOKEN = re.compile(r"\\(?:[pPk]\{[^}]*\}?|u\{[0-9A-Fa-f]*\}?|k<[^>]*>?|.)?|\[|\(\?<?[=!:]?|[*+?]|\{[0-9]+(?:,[0-9]*)?\}"
                    r"|[(){}\]|]|.", re.S)
_CLASS_TOKEN = re.compile(r"\\(?:[pP]\{[^}]*\}?|u\{[0-9A-Fa-f]*\}?|.)?|\]|.", re.S)


def _tokens(source: str):
    """(kind, match) for each token: "(", ")", "|", "q" (a quantifier), "[", "]" (a lone one),
    "{", "}" (lone ones) or "atom"; a class is an "atom" (its `[`) and its members, each a
    "class" (matched by _CLASS_TOKEN); its closing `]` is not yielded."""
    pos, n = 0, len(source)
    while pos < n:
        m = _TOKEN.match(source, pos)
        text = m.group()
        pos = m.end()
        if text == "[":
            yield "atom", m
            while pos < n:
                c = _CLASS_TOKEN.match(source, pos)
                pos = c.end()
                if c.group() == "]":
                    break
                yield "class", c
        elif text.startswith("(") or text == ")" or text == "|":
            yield text[0], m
        elif text in ("*", "+", "?") or _BOUNDS.fullmatch(text):
            yield "q", m
        elif text in ("{", "}", "]"):
            yield text, m
        else:
            yield "atom", m


_GOOD_ESCAPE = re.compile(r"\\(?:[dDwWsSfnrtv^$\\.*+?()\[\]{}|/bB]|0(?![0-9])|c[A-Za-z]"
                          r"|x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|u\{[0-9A-Fa-f]+\}|[pP]\{|k<)")


def _first_bad_escape(source: str) -> str | None:
    """V8's reason for the first escape `u` mode does not allow, or None."""
    groups = len(re.findall(r"\((?!\?)|\(\?<(?![=!])", source))
    for kind, m in _tokens(source):
        text = m.group()
        if not text.startswith("\\"):
            continue
        in_class = m.re is _CLASS_TOKEN
        c = text[1:2]
        if in_class and c in ("-", "b"):
            continue
        if not in_class and c.isdigit() and c != "0":
            number = re.match(r"[0-9]+", source[m.start() + 1:]).group()
            if int(number) <= groups:
                continue
            return "Invalid escape"
        if _GOOD_ESCAPE.match(source, m.start()):
            continue
        if c in ("c", "u"):
            return "Invalid Unicode escape"
        if in_class and c.isdigit():
            return "Invalid class escape"
        if c == "0":
            return "Invalid decimal escape"
        return "Invalid escape"
    return None


def _node_20_refuses(source: str) -> str | None:
    """V8's reason for a form regress accepts and Node 20 does not, or None."""
    names: set[str] = set()
    previous = ""
    for kind, m in _tokens(source):
        text = m.group()
        if kind == "(" and text == "(?":
            return "Invalid group"  # `(?i:...)`, `(?#...)`: not in Node 20
        if kind == "(" and text == "(?<":
            name = re.match(r"\(\?<([^>]*)>", source[m.start():])
            if name is not None:
                if name.group(1) in names:
                    return "Duplicate capture group name"
                names.add(name.group(1))
        if kind == "q" and previous in ("\\b", "\\B"):
            return "Nothing to repeat"
        previous = text if kind == "atom" else kind
    return None


@lru_cache(maxsize=256)
def compiled(source: str) -> regress.Regex:
    """`new RegExp(source, "u")`, compiled by regress."""
    try:
        regex = regress.Regex(source, "u")
    except regress.RegressError as exc:
        if str(exc).startswith("Backreference to invalid named"):  # V8 checks names last
            try:
                compiled(re.sub(r"\\k<[^>]*>", "(?:)", source))
            except JsRegexSyntaxError as other:
                raise JsRegexSyntaxError(source, other.reason) from None
        raise JsRegexSyntaxError(source, _reason(source, str(exc))) from None
    except UnicodeEncodeError:  # a lone surrogate in the source itself: as `\\uXXXX`
        escaped = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", source)
        return compiled(escaped)
    refused = _node_20_refuses(source)
    if refused is not None:
        raise JsRegexSyntaxError(source, refused)
    return regex


def test(source: str, text: str) -> bool:
    """`new RegExp(source, "u").test(text)`."""
    regex = compiled(source)
    try:
        return regex.find(text) is not None
    except UnicodeEncodeError:
        return regex.find(re.sub("[\ud800-\udfff]", "\ufffd", text)) is not None
