"""The sets of JavaScript's `\\p{..}` property escapes (vm.core.js_regex), as sorted, disjoint
(lo, hi) code point ranges built from `unicodedata` when first asked for (so Python's Unicode
version, which may trail Node's by one: a character new in the later version is Cn here).

Built: General_Category in every spelling JavaScript accepts (`L`, `Letter`, `gc=Lu`,
`General_Category=Uppercase_Letter`, `digit`, `punct`, `cntrl`, ...), and the binary properties
Any, ASCII, Assigned, ASCII_Hex_Digit, Hex_Digit, White_Space, Pattern_White_Space,
Noncharacter_Code_Point, Join_Control and Regional_Indicator with their aliases. Valid in
JavaScript and not built (UnsupportedProperty): the other binary properties (Alphabetic,
Emoji, ID_Start, ...), Script and Script_Extensions, whose data `unicodedata` does not have.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

__all__ = ["UnsupportedProperty", "complement", "normal", "property_ranges"]

_MAX = 0x10FFFF


class UnsupportedProperty(ValueError):
    """A property JavaScript knows that is not built here."""


def normal(ranges) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def complement(ranges) -> list[tuple[int, int]]:
    out, at = [], 0
    for lo, hi in normal(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    return out + ([(at, _MAX)] if at <= _MAX else [])


_GC_GROUPS = {"L": "Lu Ll Lt Lm Lo", "LC": "Lu Ll Lt", "M": "Mn Mc Me", "N": "Nd Nl No",
              "P": "Pc Pd Ps Pe Pi Pf Po", "S": "Sm Sc Sk So", "Z": "Zs Zl Zp",
              "C": "Cc Cf Cs Co Cn"}
_GC_NAMES = {
    "Other": "C", "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Unassigned": "Cn",
    "Private_Use": "Co", "Surrogate": "Cs", "Letter": "L", "Cased_Letter": "LC",
    "Lowercase_Letter": "Ll", "Modifier_Letter": "Lm", "Other_Letter": "Lo",
    "Titlecase_Letter": "Lt", "Uppercase_Letter": "Lu", "Mark": "M", "Combining_Mark": "M",
    "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Nonspacing_Mark": "Mn", "Number": "N",
    "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
    "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
    "Close_Punctuation": "Pe", "Final_Punctuation": "Pf", "Initial_Punctuation": "Pi",
    "Other_Punctuation": "Po", "Open_Punctuation": "Ps", "Symbol": "S", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Math_Symbol": "Sm", "Other_Symbol": "So", "Separator": "Z",
    "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Space_Separator": "Zs",
}
for _short in "Cc Cf Cn Co Cs Ll Lm Lo Lt Lu Mc Me Mn Nd Nl No Pc Pd Pe Pf Pi Po Ps Sc Sk Sm " \
              "So Zl Zp Zs".split() + list(_GC_GROUPS):
    _GC_NAMES[_short] = _short


def _spans(text: str) -> list[tuple[int, int]]:
    """ "30-39 5f" as [(0x30, 0x39), (0x5f, 0x5f)]."""
    return [(int(a, 16), int(b or a, 16)) for a, _, b in (w.partition("-") for w in text.split())]


_BINARY = {  # the binary properties built here, by every name JavaScript accepts
    "Any": lambda: [(0, _MAX)], "ASCII": lambda: [(0, 0x7F)],
    "Assigned": lambda: complement(_categories()["Cn"]),
    "ASCII_Hex_Digit": lambda: _spans("30-39 41-46 61-66"),
    "Hex_Digit": lambda: _spans("30-39 41-46 61-66 ff10-ff19 ff21-ff26 ff41-ff46"),
    "White_Space": lambda: _spans("9-d 20 85 a0 1680 2000-200a 2028 2029 202f 205f 3000"),
    "Pattern_White_Space": lambda: _spans("9-d 20 85 200e 200f 2028 2029"),
    "Noncharacter_Code_Point": lambda: _spans("fdd0-fdef") + [
        (p * 0x10000 + 0xFFFE, p * 0x10000 + 0xFFFF) for p in range(17)],
    "Join_Control": lambda: _spans("200c-200d"), "Regional_Indicator": lambda: _spans("1f1e6-1f1ff"),
}
for _alias, _name in (("AHex", "ASCII_Hex_Digit"), ("Hex", "Hex_Digit"), ("space", "White_Space"),
                      ("Pat_WS", "Pattern_White_Space"), ("NChar", "Noncharacter_Code_Point"),
                      ("Join_C", "Join_Control"), ("RI", "Regional_Indicator")):
    _BINARY[_alias] = _BINARY[_name]
# valid in JavaScript, not built here: JsRegexUnsupported
_OTHER_BINARY = frozenset("""Alphabetic Alpha Bidi_Control Bidi_C Bidi_Mirrored Bidi_M
    Case_Ignorable CI Cased Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM
    Changes_When_Lowercased CWL Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT
    Changes_When_Uppercased CWU Dash Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia
    Emoji Emoji_Component EComp Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation
    EPres Extended_Pictographic ExtPict Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext
    IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS Ideographic
    Ideo Logical_Order_Exception LOE Lowercase Lower Math Pattern_Syntax Pat_Syn Quotation_Mark
    QMark Radical Sentence_Terminal STerm Soft_Dotted SD Terminal_Punctuation Term Unified_Ideograph
    UIdeo Uppercase Upper Variation_Selector VS XID_Continue XIDC XID_Start XIDS""".split())
_SCRIPT_KEYS = ("Script", "sc", "Script_Extensions", "scx")


@lru_cache(maxsize=1)
def _categories() -> dict[str, list[tuple[int, int]]]:
    """Every code point's General_Category as runs, in one pass (about 0.2 s, once)."""
    runs: dict[str, list[tuple[int, int]]] = {}
    category, prev, start = unicodedata.category, None, 0
    for cp in range(_MAX + 1):
        cat = category(chr(cp))
        if cat != prev:
            if prev is not None:
                runs.setdefault(prev, []).append((start, cp - 1))
            prev, start = cat, cp
    runs.setdefault(prev, []).append((start, _MAX))
    return runs


@lru_cache(maxsize=64)
def property_ranges(body: str) -> tuple[tuple[int, int], ...] | None:
    """The ranges of `\\p{body}`; None for a name JavaScript refuses."""
    name, eq, value = body.partition("=")
    if eq:
        if name in _SCRIPT_KEYS and value:
            raise UnsupportedProperty(f"\\p{{{body}}} (a Script property) is not supported")
        if name not in ("General_Category", "gc"):
            return None
        body = value
    if body in _GC_NAMES:
        short = _GC_NAMES[body]
        cats = _categories()
        return tuple(normal(r for c in _GC_GROUPS.get(short, short).split()
                             for r in cats.get(c, [])))
    if not eq and body in _BINARY:
        return tuple(normal(_BINARY[body]()))
    if not eq and body in _OTHER_BINARY:
        raise UnsupportedProperty(f"\\p{{{body}}} is not supported")
    return None
