"""`Date.parse` (vm/core/js_date.py): table cases, a property comparing it with Node's own
`Date.parse` through one long-lived `node` child per zone, and the `date` template filter
through both CLIs."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from differential.compare import our_command, reference_command
from node_lines import NodeLines
from vm.core.js_date import date_parse, days_from_civil, local_offset_ms

NAN = math.nan
ZONES = ("UTC", "America/New_York", "Asia/Kolkata")
HAVE_ZONEINFO = all(Path("/usr/share/zoneinfo", zone).exists() for zone in ZONES)


@contextlib.contextmanager
def local_zone(tz: str):
    """The process's local zone is `tz` (what the `time` module and so date_parse read)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = tz
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


# ---- table cases (values read from node 20) --------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # the ES format: date-only forms are UTC, date-time forms local
    ("2024-01-15", 1705276800000),
    ("2024-01-15T10:20:30.5Z", 1705314030500),
    ("2024-01-15T10:00+0530", 1705293000000),
    ("+275760-09-13T00:00:00Z", 8.64e15),
    ("+275760-09-13T00:00:00.001Z", NAN),
    ("2024-01-15T24:00Z", 1705363200000),
    ("2024-01-15T24:01Z", NAN),
    ("2024-01-15T10:00Z ", NAN),            # the ES form must end at its zone
    ("2024-02-30", 1709251200000),          # a day past the month's end rolls over
    ("-000000-01-01", 978307200000),        # refused as ES; the legacy parse reads "-01-01"
    ("1/1/2024 10:20:30.000000000123456789", 1704104430123),  # V8 keeps 9 digits of 18
    # the legacy forms
    ("Jan 2 2024", 1704153600000),
    ("1,2,3", 1041465600000),
    ("Jan 2", 978393600000),                 # year 1 -> 2001
    ("5", 988675200000),                     # a lone number is a month of 2001
    ("2 January 99", 915235200000),
    ("Tuesday, 02-Jan-2024 10:00:00 GMT+0100", 1704186000000),
    ("Jan 2 2024 3:04:05 pm PST", 1704236645000),
    ("12:30 AM Jan 2 2024 UTC", 1704155400000),
    ("13:00 PM Jan 2 2024", NAN),
    ("Jan 2 2024 10:00 GMT+05:30", 1704169800000),
    ("Jan 2 2024 10:00 +5", 1704171600000),
    ("Jan 2 2024 10:00 +12345", NAN),
    ("(a (nested) comment) Jan 2 2024 (another)", 1704153600000),
    ("Jan 2 2024)", NAN),
    ("xyz Jan 2 2024", 1704153600000),       # a stray word before the first number is skipped
    ("Jan 2 2024 xyz", NAN),
    ("xyz2 Jan 2024", NAN),
    ("Jan 2 2024 junk", 1717286400000),      # a word starting "jun" names June
    ("1/2/2024T10:00", NAN),
    ("2024-1-15 10:00", 1705312800000),
    ("Jan 2 2024 GMT+596523:", -443329200000),  # 596523 hours still fit in a small integer
    ("Jan 2 2024 GMT+596524:", NAN),
    ("Jan 2 2024\u2029", NAN),               # U+2028/9 are letters to the date scanner
    ("Jan 2 2024\0 xyz", 1704153600000),    # and NUL ends the text
    ("", NAN),
])
def test_date_parse_in_utc(text, expected):
    with local_zone("UTC0"):
        assert same(date_parse(text), expected), date_parse(text)


@pytest.mark.parametrize("text, expected", [
    ("2024-01-15", 1705276800000),
    ("2024-01-15T10:00", 1705330800000),
    ("Jan 2 2024", 1704171600000),
    ("Jul 4 2024 3:30 PM", 1720121400000),
    ("2024-03-10T02:30", 1710055800000),     # skipped by the clock: the earlier offset
    ("2024-11-03T01:30", 1730611800000),     # repeated: the earlier offset
    ("+012024-07-01T00:00", 317289326400000),  # beyond 9999: the zone's rules still apply
])
def test_date_parse_in_new_york(text, expected):
    with local_zone("EST5EDT,M3.2.0,M11.1.0"):
        assert same(date_parse(text), expected)


@pytest.mark.parametrize("year", [1970, 9998, 9999, 10000, 275760])
def test_local_offset_follows_the_zones_rules_past_9999(year):
    with local_zone("EST5EDT,M3.2.0,M11.1.0"):
        day = days_from_civil(year, 7, 1) * 86_400_000
        assert local_offset_ms(day) == -4 * 3_600_000
        assert local_offset_ms(day + 180 * 86_400_000) == -5 * 3_600_000


# ---- against node --------------------------------------------------------------------

NODE_SCRIPT = r"""
require('readline').createInterface({input: process.stdin}).on('line', line => {
  process.stdout.write(String(Date.parse(JSON.parse(line))) + '\n');
});
"""


@pytest.fixture(scope="module")
def node_in():
    if not HAVE_ZONEINFO:
        pytest.skip("no /usr/share/zoneinfo: the zones cannot be set the same way in both")
    children = {tz: NodeLines(NODE_SCRIPT, TZ=tz) for tz in ZONES}
    yield {tz: (lambda text, child=child: float(child.ask(text))) for tz, child in children.items()}
    for child in children.values():
        child.close()


_WORDS = ("Jan", "february", "SEPT", "decx", "Mon", "Tuesday", "UTC", "GMT", "UT", "Z", "z",
          "EST", "pdt", "AM", "pm", "T", "t", "xyz", "junk", "(c)", "(a (b))", "(", ")", "é",
          "\u2028")
_SEPARATORS = ("/", "-", ",", ".", " ", ":", "+", "::", "\t", "\u00a0", "")


NUMERALS = st.builds(lambda n, width: str(n).zfill(width),
                     st.one_of(st.integers(0, 99), st.integers(0, 9999), st.integers(0, 10**12)),
                     st.integers(1, 6))


@st.composite
def date_strings(draw) -> str:
    """Strings near the ES format, or mixes of the legacy parser's words and numbers."""
    if draw(st.booleans()):
        parts = [draw(st.sampled_from(["", "+", "-"])) + draw(NUMERALS)]
        for sep in ("-", "-", "T", ":", ":", "."):
            if draw(st.integers(0, 4)):
                parts.append(draw(st.sampled_from([sep, sep, " ", "/"])) + draw(NUMERALS))
        parts.append(draw(st.sampled_from(["", "Z", "+05:30", "-0800", " GMT", "+1", " x"])))
        return "".join(parts)
    tokens = draw(st.lists(st.one_of(st.sampled_from(_WORDS), NUMERALS), min_size=1, max_size=8))
    return "".join(token + draw(st.sampled_from(_SEPARATORS)) for token in tokens)


@pytest.mark.slow
@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=date_strings())
def test_date_parse_agrees_with_node(node_in, tz, text):
    with local_zone(tz):
        ours = date_parse(text)
    assert same(ours, node_in[tz](text)), text


@pytest.mark.parametrize("tz", ["Asia/Kolkata"])
@settings(max_examples=60, deadline=None)
@given(text=st.text(st.sampled_from("0123456789/-,.:+() TZJanGMTpm\u00a0\u2028\0é"), max_size=16))
def test_date_parse_of_any_text_agrees_with_node(node_in, tz, text):
    with local_zone(tz):
        ours = date_parse(text)
    assert same(ours, node_in[tz](text)), text


@pytest.mark.parametrize("tz", ZONES)
def test_local_time_at_far_years_agrees_with_node(node_in, tz):
    years = ("-271821", "-000001", "+000000", "0001", "1883", "1945", "9999", "+010000", "+275760")
    texts = [f"{year}-{month}-01T{hour}:30" for year in years
             for month in ("04", "07", "09", "12") for hour in ("00", "05", "23")]
    with local_zone(tz):
        ours = [date_parse(text) for text in texts]
    assert [text for text, t in zip(texts, ours) if not same(t, node_in[tz](text))] == []


# ---- the date filter through both CLIs ------------------------------------------------

ODD_INPUTS = [
    [1, 2, 3], "Jan 2 2024", "2 January 99", "Tue, 02 Jan 2024 10:00:00 GMT+0100", "5",
    "1/2/2024 3:04:05 PM", "2024-1-15 10:00", "2024-01-15", "2024-01-15T10:00", " 2024-01-15",
    "-000000-01-01", "+275760-09-13", "Jan 2 2024 xyz", "Jan 2 2024 junk", "(note) Jan 2 2024",
    "Feb 30 2024",
    "12:30 am Jan 2 2024 EST", "24:00 Jan 2 2024", "Jan 2 2024 10:00 +5", "junk", "",
    1700000000000, "1700000000000", None, True, {"a": 1}, [2024], ["Jan", 2, 2024],
]


@pytest.mark.slow
@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])
def test_the_date_filter_agrees_with_the_original(tmp_path, tz):
    ref, why = reference_command()
    if ref is None:
        pytest.skip(f"the original cannot run: {why}")
    (tmp_path / "in.json").write_text(json.dumps([{"v": v} for v in ODD_INPUTS]))
    line = ("exec --json --shell 'cat in.json' | template --text "
            "'{{v | date}} | {{v | date YYYY-MM-DD}} | {{v | date \"DD.MM.YYYY HH:mm:ss\"}}'")
    env = {**os.environ, "TZ": tz, "LOBSTER_STATE_DIR": str(tmp_path / "state")}
    outputs = [subprocess.run([*argv, line], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60) for argv in (ref, our_command())]
    original, ours = outputs
    assert original.returncode == 0, original.stderr
    assert (ours.returncode, json.loads(ours.stdout)) == (0, json.loads(original.stdout))
