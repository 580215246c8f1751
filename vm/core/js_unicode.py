"""The sets of JavaScript's `\\p{..}` property escapes (vm.core.js_regex), as sorted, disjoint
(lo, hi) code point ranges built from `unicodedata` when first asked for (so Python's Unicode
version, which may trail Node's by one: a character new in the later version is Cn here).

Built: General_Category in every spelling JavaScript accepts (`L`, `Letter`, `gc=Lu`,
`General_Category=Uppercase_Letter`, `digit`, `punct`, `cntrl`, ...), and the binary properties
Any, ASCII, Assigned, ASCII_Hex_Digit, Hex_Digit, White_Space, Pattern_White_Space,
Noncharacter_Code_Point, Join_Control and Regional_Indicator with their aliases; and
Script=/sc= of fourteen common scripts (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic,
Devanagari, Bengali, Thai, Georgian, Hangul, Hiragana, Katakana, Han), whose ranges
`unicodedata` does not have: a table here, as Node 20 reads them. Valid in JavaScript and not
built (UnsupportedProperty): the other binary properties (Alphabetic, Emoji, ID_Start, ...),
the other scripts and Script_Extensions (an unknown script name, which JavaScript refuses, is
reported unsupported too).
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
    "Join_Control": lambda: _spans("200c-200d"),
    "Regional_Indicator": lambda: _spans("1f1e6-1f1ff"),
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
# Script=NAME (or its alias) for common scripts: Node 20's ranges (its Unicode 17.0)
_SCRIPTS = {
    ("Latin", "Latn"):
        "41-5a 61-7a aa ba c0-d6 d8-f6 f8-2b8 2e0-2e4 1d00-1d25 1d2c-1d5c 1d62-1d65 1d6b-1d77 "
        "1d79-1dbe 1e00-1eff 2071 207f 2090-209c 212a-212b 2132 214e 2160-2188 2c60-2c7f "
        "a722-a787 a78b-a7dc a7f1-a7ff ab30-ab5a ab5c-ab64 ab66-ab69 fb00-fb06 ff21-ff3a "
        "ff41-ff5a 10780-10785 10787-107b0 107b2-107ba 1df00-1df1e 1df25-1df2a",
    ("Greek", "Grek"):
        "370-373 375-377 37a-37d 37f 384 386 388-38a 38c 38e-3a1 3a3-3e1 3f0-3ff 1d26-1d2a "
        "1d5d-1d61 1d66-1d6a 1dbf 1f00-1f15 1f18-1f1d 1f20-1f45 1f48-1f4d 1f50-1f57 1f59 1f5b "
        "1f5d 1f5f-1f7d 1f80-1fb4 1fb6-1fc4 1fc6-1fd3 1fd6-1fdb 1fdd-1fef 1ff2-1ff4 1ff6-1ffe "
        "2126 ab65 10140-1018e 101a0 1d200-1d245",
    ("Cyrillic", "Cyrl"):
        "400-484 487-52f 1c80-1c8a 1d2b 1d78 2de0-2dff a640-a69f fe2e-fe2f 1e030-1e06d 1e08f",
    ("Armenian", "Armn"):
        "531-556 559-58a 58d-58f fb13-fb17",
    ("Hebrew", "Hebr"):
        "591-5c7 5d0-5ea 5ef-5f4 fb1d-fb36 fb38-fb3c fb3e fb40-fb41 fb43-fb44 fb46-fb4f",
    ("Arabic", "Arab"):
        "600-604 606-60b 60d-61a 61c-61e 620-63f 641-64a 656-66f 671-6dc 6de-6ff 750-77f 870-891 "
        "897-8e1 8e3-8ff fb50-fd3d fd40-fdcf fdf0-fdff fe70-fe74 fe76-fefc 10e60-10e7e "
        "10ec2-10ec7 10ed0-10ed8 10efa-10eff 1ee00-1ee03 1ee05-1ee1f 1ee21-1ee22 1ee24 1ee27 "
        "1ee29-1ee32 1ee34-1ee37 1ee39 1ee3b 1ee42 1ee47 1ee49 1ee4b 1ee4d-1ee4f 1ee51-1ee52 "
        "1ee54 1ee57 1ee59 1ee5b 1ee5d 1ee5f 1ee61-1ee62 1ee64 1ee67-1ee6a 1ee6c-1ee72 "
        "1ee74-1ee77 1ee79-1ee7c 1ee7e 1ee80-1ee89 1ee8b-1ee9b 1eea1-1eea3 1eea5-1eea9 "
        "1eeab-1eebb 1eef0-1eef1",
    ("Devanagari", "Deva"):
        "900-950 955-963 966-97f a8e0-a8ff 11b00-11b09",
    ("Bengali", "Beng"):
        "980-983 985-98c 98f-990 993-9a8 9aa-9b0 9b2 9b6-9b9 9bc-9c4 9c7-9c8 9cb-9ce 9d7 9dc-9dd "
        "9df-9e3 9e6-9fe",
    ("Thai", "Thai"):
        "e01-e3a e40-e5b",
    ("Georgian", "Geor"):
        "10a0-10c5 10c7 10cd 10d0-10fa 10fc-10ff 1c90-1cba 1cbd-1cbf 2d00-2d25 2d27 2d2d",
    ("Hangul", "Hang"):
        "1100-11ff 302e-302f 3131-318e 3200-321e 3260-327e a960-a97c ac00-d7a3 d7b0-d7c6 "
        "d7cb-d7fb ffa0-ffbe ffc2-ffc7 ffca-ffcf ffd2-ffd7 ffda-ffdc",
    ("Hiragana", "Hira"):
        "3041-3096 309d-309f 1b001-1b11f 1b132 1b150-1b152 1f200",
    ("Katakana", "Kana"):
        "30a1-30fa 30fd-30ff 31f0-31ff 32d0-32fe 3300-3357 ff66-ff6f ff71-ff9d 1aff0-1aff3 "
        "1aff5-1affb 1affd-1affe 1b000 1b120-1b122 1b155 1b164-1b167",
    ("Han", "Hani"):
        "2e80-2e99 2e9b-2ef3 2f00-2fd5 3005 3007 3021-3029 3038-303b 3400-4dbf 4e00-9fff "
        "f900-fa6d fa70-fad9 16fe2-16fe3 16ff0-16ff6 20000-2a6df 2a700-2b81d 2b820-2cead "
        "2ceb0-2ebe0 2ebf0-2ee5d 2f800-2fa1d 30000-3134a 31350-33479",
}
_SCRIPT_NAMES = {name: spans for names, spans in _SCRIPTS.items() for name in names}
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
        if name in ("Script", "sc") and value in _SCRIPT_NAMES:
            return tuple(_spans(_SCRIPT_NAMES[value]))
        if name in _SCRIPT_KEYS and value:
            raise UnsupportedProperty(f"\\p{{{body}}} is not supported (of the scripts, only "
                                      f"Script={', '.join(n for n, _ in _SCRIPTS)} are)")
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
