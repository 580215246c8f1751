"""JavaScript's `Date.parse` as Node's V8 computes it: the ES date-time string format first,
then V8's legacy fallback grammar; and the proleptic-Gregorian and local-time arithmetic it
needs. Rules learned by feeding generated strings to `node` (see tests/machine/test_js_date.py)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from vm.core.js import JS_WHITESPACE

__all__ = ["civil_from_days", "date_parse", "days_from_civil", "local_offset_ms",
           "MAX_TIME", "MS_PER_DAY"]

MS_PER_DAY = 86_400_000
MAX_TIME = 8_640_000_000_000_000            # |time value| limit (TimeClip)
_MAX_LOCAL_TIME = MAX_TIME + 30 * MS_PER_DAY  # a local time beyond this is refused before UTC
_MAX_DAY_YEAR = 1_000_000                   # MakeDay refuses years beyond this
_SMI_MAX = 2**31 - 1                        # a zone offset's seconds must fit a small integer
_MAX_DIGITS = 9                             # a numeral keeps its first 9 significant digits


# ---- calendar and local time ----------------------------------------------------------

def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


_CYCLE_YEARS = 400      # the Gregorian calendar repeats every 400 years (146097 days)
_CYCLE_DAYS = 146097


def local_offset_ms(local_ms: int) -> int:
    """How far local wall-clock time (the process's TZ, via the `time` module) is ahead of UTC
    at the wall-clock moment `local_ms` (ms since 1970-01-01 on the local clock). A skipped or
    repeated wall time takes the offset in force before the transition, as V8 does. A year
    outside 2..9998 is moved by whole 400-year cycles into that range first."""
    days, ms_of_day = divmod(local_ms, MS_PER_DAY)
    y, _, _ = civil_from_days(days)
    if y < 2:       # keep clear of datetime's year 1 and year 9999 at both ends
        days += ((401 - y) // _CYCLE_YEARS) * _CYCLE_DAYS
    elif y > 9998:
        days -= ((y - 9199) // _CYCLE_YEARS) * _CYCLE_DAYS
    y, mo, d = civil_from_days(days)
    wall = datetime(y, mo, d) + timedelta(milliseconds=ms_of_day)
    return (days * MS_PER_DAY + ms_of_day) - round(wall.timestamp() * 1000)


def _make_time(year: int, month: int, day: int, h: int, mi: int, s: int, ms: int,
               utc_offset_s: int | None) -> float:
    """MakeDate(MakeDay, MakeTime), then to UTC (the local zone when no offset) and TimeClip."""
    if abs(year) > _MAX_DAY_YEAR:
        return math.nan
    t = ((days_from_civil(year, month, 1) + day - 1) * MS_PER_DAY
         + ((h * 60 + mi) * 60 + s) * 1000 + ms)
    if utc_offset_s is None:
        if abs(t) > _MAX_LOCAL_TIME:
            return math.nan
        t -= local_offset_ms(t)
    else:
        t -= utc_offset_s * 1000
    return float(t) if abs(t) <= MAX_TIME else math.nan


# ---- tokens ---------------------------------------------------------------------------
# A token is (kind, value, length). Kinds: NUM (value: the numeral, its first 9 significant
# digits), SYM (one of : - + . ) as value), WORD (value: (keyword type, keyword value)),
# WS, OTHER (a parenthesised comment or any other character), END.

NUM, SYM, WORD, WS, OTHER, END = "num", "sym", "word", "ws", "other", "end"
MONTH, ZONE, T_SEP, AM_PM, UNKNOWN = "month", "zone", "t", "ampm", "unknown"

_END_TOKEN = (END, None, 0)
_SYMBOLS = ":-+.)"
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_KEYWORDS = {  # words of at most 3 letters (compared case-insensitively); months by prefix
    "am": (AM_PM, 0), "pm": (AM_PM, 12), "t": (T_SEP, 0), "z": (ZONE, 0),
    "ut": (ZONE, 0), "utc": (ZONE, 0), "gmt": (ZONE, 0),
    "edt": (ZONE, -4), "est": (ZONE, -5), "cdt": (ZONE, -5), "cst": (ZONE, -6),
    "mdt": (ZONE, -6), "mst": (ZONE, -7), "pdt": (ZONE, -7), "pst": (ZONE, -8),
}


_LINE_BREAKS = "\u2028\u2029"  # whitespace to JS, but letters to V8's date scanner


def _is_word_char(c: str) -> bool:
    return c >= "A" and (c not in JS_WHITESPACE or c in _LINE_BREAKS)


def _lower(c: str) -> str:
    """V8 lowers a keyword letter by setting bit 0x20, whatever the character."""
    return chr(ord(c) | 0x20)


def _keyword(word: str) -> tuple[str, int]:
    prefix = "".join(_lower(c) for c in word[:3])
    if prefix in _MONTHS:
        return MONTH, _MONTHS.index(prefix) + 1
    if len(word) <= 3 and prefix in _KEYWORDS:
        return _KEYWORDS[prefix]
    return UNKNOWN, 0


def _tokens(text: str) -> list[tuple]:
    text = text.split("\0", 1)[0]  # V8's scanner stops at a NUL character
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        j = i + 1
        if "0" <= c <= "9":
            while j < n and "0" <= text[j] <= "9":
                j += 1
            digits = text[i:j].lstrip("0")[:_MAX_DIGITS]
            out.append((NUM, int(digits or "0"), j - i))
        elif c in _SYMBOLS:
            out.append((SYM, c, 1))
        elif _is_word_char(c):
            while j < n and _is_word_char(text[j]):
                j += 1
            out.append((WORD, _keyword(text[i:j]), j - i))
        elif c in JS_WHITESPACE:
            while j < n and text[j] in JS_WHITESPACE and not _is_word_char(text[j]):
                j += 1
            out.append((WS, None, j - i))
        elif c == "(":
            depth = 1
            while j < n and depth > 0:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            out.append((OTHER, None, j - i))
        else:
            out.append((OTHER, None, 1))
        i = j
    return out


class _Scanner:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> tuple:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else _END_TOKEN

    def next(self) -> tuple:
        token = self.peek()
        self.pos += 1
        return token

    def skip(self, symbol: str) -> bool:
        if self.peek()[:2] == (SYM, symbol):
            self.pos += 1
            return True
        return False

    def peek_number(self, length: int | None = None) -> int | None:
        """The next token's value when it is a numeral (of exactly `length` characters)."""
        kind, value, size = self.peek()
        return value if kind == NUM and (length is None or size == length) else None


def _milliseconds(token: tuple) -> int:
    """A fraction's first three digits, read from the numeral's value and its length (V8
    counts at most 9 characters, leading zeros included)."""
    _, value, length = token
    length = min(length, _MAX_DIGITS)
    if length < 3:
        return value * 10 ** (3 - length)
    return value // 10 ** (length - 3)


def _is_z(token: tuple) -> bool:
    return token[0] == WORD and token[1] == (ZONE, 0) and token[2] == 1


def _is_sign(token: tuple) -> bool:
    return token[0] == SYM and token[1] in "+-"


# ---- the parts of a date --------------------------------------------------------------

class _Day:
    """Up to three numbers plus a named month; which is which is decided at the end."""

    def __init__(self) -> None:
        self.comp: list[int] = []
        self.named_month: int | None = None
        self.iso = False

    def add(self, n: int) -> bool:
        if len(self.comp) == 3:
            return False
        self.comp.append(n)
        return True

    def resolve(self) -> tuple[int, int, int] | None:
        if not self.comp:
            return None
        a, b, c = self.comp + [1] * (3 - len(self.comp))
        if self.named_month is None:
            year, month, day = (a, b, c) if self.iso or not 1 <= a <= 31 else (c, a, b)
        else:
            month = self.named_month
            year, day = (a, b) if not 1 <= a <= 31 else (b, a)
        if not self.iso:
            if 0 <= year <= 49:
                year += 2000
            elif 50 <= year <= 99:
                year += 1900
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        return year, month, day


class _Time:
    """Hour, minute, second, millisecond in the order they come; AM/PM applied at the end."""

    def __init__(self) -> None:
        self.comp: list[int] = []
        self.hour_offset: int | None = None

    def empty(self) -> bool:
        return not self.comp

    def expecting(self, n: int) -> bool:
        i = len(self.comp)
        return (i == 1 and n <= 59) or (i == 2 and n <= 59) or (i == 3 and n <= 999)

    def add(self, n: int) -> bool:
        if len(self.comp) == 4:
            return False
        self.comp.append(n)
        return True

    def add_final(self, n: int) -> bool:
        if not self.add(n):
            return False
        self.comp += [0] * (4 - len(self.comp))
        return True

    def resolve(self) -> tuple[int, int, int, int] | None:
        h, mi, s, ms = self.comp + [0] * (4 - len(self.comp))
        if self.hour_offset is not None:
            if h > 12:
                return None
            h = h % 12 + self.hour_offset
        if h <= 23 and mi <= 59 and s <= 59 and ms <= 999:
            return h, mi, s, ms
        return (h, mi, s, ms) if h == 24 and mi == s == ms == 0 else None


class _Zone:
    """A UTC offset: sign, hour and minute as they arrive (None = not given)."""

    def __init__(self) -> None:
        self.sign: int | None = None
        self.hour: int | None = None
        self.minute: int | None = None

    def set_hours(self, hours: int) -> None:
        self.sign = -1 if hours < 0 else 1
        self.hour, self.minute = abs(hours), 0

    def expecting(self, n: int) -> bool:
        return self.hour is not None and self.minute is None and n <= 59

    def is_utc(self) -> bool:
        return self.hour == 0 and self.minute == 0

    def seconds(self) -> int | None | bool:
        """Offset in seconds; None for local time; False when it is out of range."""
        if self.sign is None:
            return None
        total = ((self.hour or 0) * 3600 + (self.minute or 0) * 60) % 2**32
        if total > _SMI_MAX:
            return False
        return self.sign * total


# ---- the grammar ----------------------------------------------------------------------

_INVALID = ("invalid", None, 0)


def _iso(sc: _Scanner, day: _Day, time: _Time, tz: _Zone) -> tuple:
    """The ES format `[+-yy]yyyy[-MM[-DD]][THH:mm[:ss[.sss]][Z|+-hh:mm|+-hhmm]]`. Returns END
    when it matched all of the text, _INVALID when the text is refused outright, and otherwise
    the first token it could not use, the legacy grammar carrying on from there (with
    whatever date numbers were read)."""
    if _is_sign(sc.peek()):
        sign = sc.next()
        if sc.peek_number(6) is None:
            return sign
        year = sc.next()[1]
        if sign[1] == "-" and year == 0:
            return sign  # -000000 is refused, and its digits are gone
        day.add(-year if sign[1] == "-" else year)
    elif sc.peek_number(4) is not None:
        day.add(sc.next()[1])
    else:
        return sc.next()
    if sc.skip("-"):
        month = sc.peek_number(2)
        if month is None or not 1 <= month <= 12:
            return sc.next()
        day.add(sc.next()[1])
        if sc.skip("-"):
            d = sc.peek_number(2)
            if d is None or not 1 <= d <= 31:
                return sc.next()
            day.add(sc.next()[1])
    if sc.peek()[:2] != (WORD, (T_SEP, 0)):
        if sc.peek()[0] != END:
            return sc.next()
    else:
        sc.next()
        hour = sc.peek_number(2)
        if hour is None or hour > 24:
            return _INVALID
        time.add(sc.next()[1])
        if not sc.skip(":"):
            return _INVALID
        minute = sc.peek_number(2)
        if minute is None or minute > 59 or (hour == 24 and minute > 0):
            return _INVALID
        time.add(sc.next()[1])
        if sc.skip(":"):
            second = sc.peek_number(2)
            if second is None or second > 59 or (hour == 24 and second > 0):
                return _INVALID
            time.add(sc.next()[1])
            if sc.skip("."):
                frac = sc.peek_number()
                if frac is None or (hour == 24 and frac > 0):
                    return _INVALID
                time.add(_milliseconds(sc.next()))
        if _is_z(sc.peek()):
            sc.next()
            tz.set_hours(0)
        elif _is_sign(sc.peek()):
            tz.sign = 1 if sc.next()[1] == "+" else -1
            hhmm = sc.peek_number(4)
            if hhmm is not None:
                if hhmm // 100 > 23 or hhmm % 100 > 59:
                    return _INVALID
                sc.next()
                tz.hour, tz.minute = divmod(hhmm, 100)
            else:
                hh = sc.peek_number(2)
                if hh is None or hh > 23:
                    return _INVALID
                tz.hour = sc.next()[1]
                if not sc.skip(":"):
                    return _INVALID
                mm = sc.peek_number(2)
                if mm is None or mm > 59:
                    return _INVALID
                tz.minute = sc.next()[1]
        if sc.peek()[0] != END:
            return _INVALID
    if tz.hour is None and time.empty():
        tz.set_hours(0)  # a date-only form is UTC; a date-time form without offset is local
    day.iso = True
    return _END_TOKEN


def _legacy(sc: _Scanner, token: tuple, day: _Day, time: _Time, tz: _Zone) -> bool:
    """V8's fallback grammar, from `token` on. False when the text is refused."""
    read_number = bool(day.comp)
    while token[0] != END:
        kind, value, length = token
        if kind == NUM:
            read_number = True
            n = value
            if sc.skip(":"):
                if sc.skip(":"):
                    if not time.empty():
                        return False
                    time.add(n)
                    time.add(0)
                else:
                    if not time.add(n):
                        return False
                    sc.skip(".")
            elif sc.skip(".") and time.expecting(n):
                time.add(n)
                if sc.peek_number() is None:
                    return False
                time.add_final(_milliseconds(sc.next()))
            elif tz.expecting(n):
                tz.minute = n
            elif time.expecting(n):
                time.add_final(n)
                after = sc.peek()
                if after[0] not in (END, WS) and not _is_z(after) and not _is_sign(after):
                    return False
            else:
                if not day.add(n):
                    return False
                sc.skip("-")
        elif kind == WORD:
            word_type, word_value = value
            if word_type == AM_PM and not time.empty():
                time.hour_offset = word_value
            elif word_type == MONTH:
                day.named_month = word_value
                sc.skip("-")
            elif word_type == ZONE and read_number:
                tz.set_hours(word_value)
            elif read_number or sc.peek()[0] == NUM:
                return False  # a stray word after a number, or glued to the first one
        elif _is_sign(token) and (tz.is_utc() or not time.empty()):
            tz.sign = 1 if value == "+" else -1
            n = digits = 0
            if sc.peek()[0] == NUM:
                _, n, digits = sc.next()
            read_number = True
            if sc.peek()[:2] == (SYM, ":"):
                tz.hour, tz.minute = n, None
            elif digits in (1, 2):
                tz.hour, tz.minute = n, 0
            elif digits in (3, 4):
                tz.hour, tz.minute = divmod(n, 100)
            else:
                return False
        elif (_is_sign(token) or token[:2] == (SYM, ")")) and read_number:
            return False
        token = sc.next()
    return True


def date_parse(text: str) -> float:
    """`Date.parse(text)` as Node computes it: epoch milliseconds, or NaN. A form without a
    zone is local time in the process's zone (TZ)."""
    sc = _Scanner(text)
    day, time, tz = _Day(), _Time(), _Zone()
    token = _iso(sc, day, time, tz)
    if token is _INVALID or not _legacy(sc, token, day, time, tz):
        return math.nan
    ymd, hms, offset = day.resolve(), time.resolve(), tz.seconds()
    if ymd is None or hms is None or offset is False:
        return math.nan
    return _make_time(*ymd, *hms, offset)
