"""Every numeric bound a caller can set: its name, unit, minimum, maximum and how it parses.
The command line, tool requests, MCP schemas and the embedding `Options` all check through
this table, so a value is refused the same way wherever it comes from, and a huge or absurd
value (a 400-digit TTL, 10**30, NaN) fails at once with its limit named."""

from __future__ import annotations

import math
from typing import Any

from vm.core.patterns import compiled
from vm.core.records import frozen

MAX_TEXT = 64  # characters of a duration or number given as text; past this it is refused
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = compiled(r"(\d+)(ms|s|m|h|d|w)")
DAY_MS = _UNIT_MS["d"]


class BoundError(ValueError):
    """A value that is not of its bound's form, or lies outside it; `message` names the
    field and, for a value out of range, the limit. The caller picks the error code (and may
    word a `form` error in its own way)."""

    def __init__(self, message: str, kind: str = "range") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind  # "form": not a value of this kind at all; "range": past the limit


def shown(value: Any) -> str:
    """A value as a message shows it: repr, cut short (a caller's mistake can be any size)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def duration_ms(text: str, limit: int = 10**30) -> int | None:
    """`7d`, `12h`, `30m`, `45s`, `500ms`, `1w`, or several (`1h30m`) -> ms; None when the text
    is no such duration. A duration past `limit` gives `limit + 1`, its digits never all
    converted (so a 5000-digit duration costs nothing and is still too large)."""
    text = text.strip().lower()
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    cap = limit + 1
    total = 0
    for digits, unit in parts:
        digits = digits.lstrip("0") or "0"
        if len(digits) > len(str(cap)):
            return cap
        total += int(digits) * _UNIT_MS[unit]
        if total >= cap:
            return cap
    return total


def _number(number: int | float) -> str:
    """A number for a message: a huge int by its size (its digits may not even print)."""
    if isinstance(number, int) and abs(number) >= 10**30:
        return f"a number of about {int(number.bit_length() * 0.30103) + 1} digits"
    return repr(number)


def _spelled(ms: int) -> str:
    """`ms` as the largest whole unit, for messages: 3155760000000 -> `36525d`."""
    for unit in ("w", "d", "h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0 and ms >= _UNIT_MS[unit]:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


@frozen
class Bound:
    """One bound: values are integers of `unit` in [minimum, maximum]. `durations`: text such
    as `30m` is read too (the unit is then ms); `digits`: text of digits alone is read as a
    number of the unit; `numbers`: a JSON number may be fractional (it is truncated, and one
    just under the minimum, above minimum - 1, is raised to it: `timeoutMs: 0.5` is 1 ms)."""

    name: str
    unit: str
    minimum: int
    maximum: int
    durations: bool = False
    digits: bool = False
    numbers: bool = False
    form: str = ""  # how the value is written, for the message of a value of the wrong form

    def parse(self, value: Any, field: str, text: bool = True) -> int:
        """The value as an int in bounds, or a BoundError naming `field` (and the limit).
        `text=False`: only a JSON number is taken (a tool request's numeric fields)."""
        if isinstance(value, str) and text:
            number = self._parse_text(value, field)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._wrong_form(value, field)
        elif isinstance(value, float) and not self.numbers and not value.is_integer():
            raise self._wrong_form(value, field)
        elif isinstance(value, float) and math.isnan(value):
            raise self._wrong_form(value, field)
        else:
            number = value
        return self.check(number, field)

    def check(self, number: int | float, field: str) -> int:
        """A number already read: in bounds, as an int, or a BoundError naming the limit."""
        if number > self.maximum:
            raise BoundError(f"{field} must be at most {self.limit_text()}, got "
                             f"{_number(number)}")
        if number < self.minimum and not (self.numbers and number > self.minimum - 1):
            raise self._wrong_form(number, field)  # each form names it ("positive", ...)
        return max(int(number), self.minimum)

    def limit_text(self) -> str:
        spelled = _spelled(self.maximum) if self.durations else ""
        spelled = f" ({spelled})" if spelled and not spelled.endswith("ms") else ""
        return f"{self.maximum} {self.unit}{spelled}"

    def _parse_text(self, text: str, field: str) -> int:
        """Digits or a duration, read in time linear in the text (a part of more digits than
        the maximum has is over it, uncomputed); text past MAX_TEXT is refused, by its limit
        when it reads as a value too large."""
        raw = text.strip()
        number = None
        if self.digits and raw.isascii() and raw.isdigit():
            digits = raw.lstrip("0") or "0"
            number = self.maximum + 1 if len(digits) > len(str(self.maximum)) else int(digits)
        elif self.durations:
            number = duration_ms(raw, self.maximum)
        if len(text) > MAX_TEXT and (number is None or number <= self.maximum):
            raise BoundError(f"{field} must be at most {MAX_TEXT} characters "
                             f"({self.form}), got {len(text)}", "form")
        if number is None:
            raise self._wrong_form(text, field)
        if number > self.maximum:
            raise BoundError(f"{field} must be at most {self.limit_text()}, got {shown(text)}")
        if number < self.minimum:
            raise self._wrong_form(text, field)
        return number

    def _wrong_form(self, value: Any, field: str) -> BoundError:
        what = _number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else shown(value)
        return BoundError(f"{field} must be {self.form}, got {what}", "form")


YEAR_MS = 365 * DAY_MS + DAY_MS // 4
# How long a checkpoint may stay resumable: 100 years keeps every expiry a date that every
# store, clock and formatter can hold (PostgreSQL, time_t, ISO 8601 with a 4-digit year).
CHECKPOINT_TTL = Bound("checkpoint TTL", "ms", 1, 100 * YEAR_MS, durations=True,
                       form="a duration such as 30m, 12h or 7d, or a positive number of "
                            "milliseconds")
# A run's wall-clock limit: the longest wait a timer can hold (about 24.8 days).
TIMEOUT_MS = Bound("timeout", "ms", 1, 2**31 - 1, durations=True, digits=True, numbers=True,
                   form="a number of milliseconds or a duration such as 30s")
# The cap on an envelope and each child's output: the largest integer a JSON number holds.
MAX_STDOUT_BYTES = Bound("output cap", "bytes", 1, 2**53, digits=True, numbers=True,
                         form="a positive number of bytes")
# An age or grace period of `pending --older-than`, `gc --grace`, `olderThan` (0 allowed).
AGE = Bound("age", "ms", 0, 100 * YEAR_MS, durations=True,
            form="a duration such as 7d, 12h or 30m")

# A resume's claim lease (LOBSTER_CLAIM_LEASE): renewed every third of it, so at least 1 s;
# at most the longest run, which it must be able to outlive between renewals.
CLAIM_LEASE = Bound("claim lease", "ms", 1000, TIMEOUT_MS.maximum, durations=True,
                    form="a duration such as 30s or 5m, at least 1s")
# How long an ended checkpoint's record is kept (LOBSTER_TOMBSTONE_TTL); 0s: until the next gc.
TOMBSTONE_TTL = Bound("tombstone TTL", "ms", 0, 100 * YEAR_MS, durations=True,
                      form="a duration such as 7d, 12h or 0s")

BOUNDS = {"checkpointTtl": CHECKPOINT_TTL, "timeoutMs": TIMEOUT_MS,
          "maxStdoutBytes": MAX_STDOUT_BYTES, "olderThan": AGE}


def schema(bound: Bound, text: bool = True) -> dict[str, Any]:
    """The JSON Schema limits of a request field under `bound` (MCP tool schemas publish
    them); `text`: the field may also be a string (a duration or digits)."""
    out: dict[str, Any] = {"maximum": bound.maximum}
    if bound.numbers:
        out["exclusiveMinimum"] = bound.minimum - 1
    else:
        out["minimum"] = bound.minimum
    if text and (bound.durations or bound.digits):
        out["maxLength"] = MAX_TEXT
    return out


# Unix seconds that every formatter and store can hold: 1970 to the end of year 9999.
LATEST_TIME_S = 253_402_300_799.0


def clamp_time(seconds: float) -> float:
    """A stored time, however absurd (1e300, inf, NaN, negative), as one a formatter can show."""
    if seconds != seconds:
        return LATEST_TIME_S
    return min(max(seconds, 0.0), LATEST_TIME_S)
