"""Every bound is checked in one place (vm/core/bounds.py), the same way for the command line, a tool
request, an MCP call and the embedding API: a huge or absurd value is refused at once with its
limit named, and a record that already holds an absurd expiry never breaks `pending` or `gc`."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from vm.service import admin
from vm.core import bounds
from vm.cli import mcp
from vm.service.protocol import Options, handle, run
from vm.host.store import open_store
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

GATED = "exec --shell 'touch ran' | approve --prompt 'Go?'"
HUGE_WEEKS = "99999999999999999999999w"


@pytest.fixture
def options(tmp_path) -> Options:
    return Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={})


# the findings of issue 24, each as it was reported --------------------------------------------
def test_a_huge_cli_ttl_is_refused_and_pending_still_lists_the_store(cli):
    envelope, code = cli.tool("run", "--mode", "tool", "--checkpoint-ttl", HUGE_WEEKS,
                              "exec --json --shell 'echo [1]' | approve --prompt Go")
    assert code == 2 and envelope["error"]["code"] == "E001", envelope
    assert "at most" in envelope["error"]["message"]
    assert str(bounds.CHECKPOINT_TTL.maximum) in envelope["error"]["message"]
    listed = cli.run("pending", "--format", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr


def test_mcp_refuses_the_ttl_that_lobster_tool_refuses(options, tmp_path):
    schema = mcp.input_schema("run")["properties"]["checkpointTtl"]
    assert schema["maximum"] == bounds.CHECKPOINT_TTL.maximum
    assert schema["maxLength"] == bounds.MAX_TEXT
    envelope = mcp.call("lobster_run", {"pipeline": GATED, "checkpointTtl": 10**30}, options)
    assert envelope["ok"] is False and envelope["error"]["code"] == "E001", envelope
    assert not (tmp_path / "ran").exists()
    assert handle({"action": "run", "pipeline": GATED, "checkpointTtl": 1e30},
                  options)["error"]["code"] == "E001"


@pytest.mark.parametrize("ttl", ["1" * 400 + "w", "1" * 5000 + "ms", "9" * 30 + "d1s",
                                 "0" * 300 + "1" * 300 + "h"])
def test_a_ttl_string_of_hundreds_of_digits_is_a_parse_error_not_a_bug(options, ttl, tmp_path):
    envelope = handle({"action": "run", "pipeline": GATED, "checkpointTtl": ttl}, options)
    assert envelope["error"]["code"] == "E001", envelope
    assert "at most" in envelope["error"]["message"]
    assert len(envelope["error"]["message"]) < 300  # the value is not echoed back whole
    assert not (tmp_path / "ran").exists()


def test_one_absurd_stored_expiry_never_breaks_pending_or_gc(options):
    handle({"action": "run", "pipeline": GATED}, options)
    store = options.store()
    (good,) = store.list_parked()
    for n, expiry in enumerate((1e30, 1e300, math.inf, -1e300)):
        store.save_frame(f"pipeline_resume_{n:032x}", good.blob, expires_at=expiry)
    entries = admin.pending(options)
    assert len(entries) == 5
    assert sum(e["status"] == "waiting" for e in entries) == 4  # the far future is waiting
    assert all(isinstance(e["expiresAt"], (str, type(None))) for e in entries)
    report = admin.gc(options, dry_run=True)
    assert report["checkpoints"] == [f"pipeline_resume_{3:032x}"]  # expired in the far past


def test_an_absurd_stored_expiry_is_listed_by_the_cli(cli):
    cli.pipeline("exec --json --shell 'echo [1]' | approve --prompt Go")
    store = open_store(str(cli.state), {})
    (good,) = store.list_parked()
    store.save_frame(good.state_key, good.blob, expires_at=1e300)
    listed = cli.run("pending")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "waiting" in listed.stdout


# every surface refuses a value past a bound, with the limit named ----------------------------
def test_the_cli_timeout_of_thousands_of_digits_is_a_usage_error(cli):
    proc = cli.run("run", "--mode", "tool", "--timeout", "9" * 5000, "exec --json --shell 'echo 1'")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    envelope = json.loads(proc.stdout)
    assert envelope["error"]["code"] == "E021"
    assert f"at most {bounds.TIMEOUT_MS.maximum}" in envelope["error"]["message"]


@pytest.mark.parametrize("argv", [["gc", "--grace", "9" * 5000 + "ms"],
                                  ["pending", "--older-than", "1" * 400 + "w"]])
def test_admin_durations_of_thousands_of_digits_are_usage_errors(cli, argv):
    proc = cli.run(*argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "T498" not in proc.stderr
    assert "at most" in proc.stderr.splitlines()[0]


@pytest.mark.parametrize("ttl", [HUGE_WEEKS, "9" * 5000 + "d"])
def test_the_environment_ttl_past_its_bound_is_refused_before_anything_runs(tmp_path, ttl):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"),
                      env={"LOBSTER_CHECKPOINT_TTL": ttl})
    envelope = handle({"action": "run", "pipeline": GATED}, options)
    assert envelope["error"]["code"] == "E004" and "at most" in envelope["error"]["message"]
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("field, value", [("checkpoint_ttl_ms", 10**30),
                                          ("timeout_ms", 10**30), ("timeout_ms", -1),
                                          ("max_stdout_bytes", 2**80)])
def test_embedding_options_past_a_bound_are_refused_before_anything_runs(tmp_path, field, value):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"), env={},
                      **{field: value})
    envelope = run(GATED, options)
    assert envelope["ok"] is False and envelope["error"]["code"] in ("E004", "E010"), envelope
    assert "at most" in envelope["error"]["message"] or "positive" in envelope["error"]["message"]
    assert not (tmp_path / "ran").exists()


def test_pending_older_than_over_mcp_is_bounded(options):
    envelope = mcp.call("lobster_pending", {"olderThan": "1" * 400 + "w"}, options)
    assert envelope["ok"] is False and envelope["error"]["code"] == "E001"
    assert mcp.input_schema("pending")["properties"]["olderThan"]["maxLength"] == bounds.MAX_TEXT


def test_the_mcp_schemas_take_their_maximums_from_the_bounds_table():
    for action in ("run", "resume"):
        props = mcp.input_schema(action)["properties"]
        assert props["timeoutMs"]["maximum"] == bounds.TIMEOUT_MS.maximum
        assert props["maxStdoutBytes"]["maximum"] == bounds.MAX_STDOUT_BYTES.maximum
        assert props["checkpointTtl"]["maximum"] == bounds.CHECKPOINT_TTL.maximum


# properties of the parsers ---------------------------------------------------------------------
DURATION_BOUNDS = [bounds.CHECKPOINT_TTL, bounds.AGE, bounds.TIMEOUT_MS]


@settings(max_examples=300, deadline=None)
@given(bound=st.sampled_from(DURATION_BOUNDS),
       text=st.one_of(st.text(max_size=80),
                      st.from_regex(r"\A[0-9]{0,500}(ms|s|m|h|d|w)([0-9]{0,40}(ms|s|m|h|d|w))?\Z")))
def test_parsing_any_text_gives_a_value_in_bounds_or_a_bound_error(bound, text):
    try:
        value = bound.parse(text, "x")
    except bounds.BoundError as exc:
        assert "\n" not in exc.message and len(exc.message) < 400
    else:
        assert isinstance(value, int) and bound.minimum <= value <= bound.maximum


@settings(max_examples=300, deadline=None)
@given(bound=st.sampled_from(DURATION_BOUNDS + [bounds.MAX_STDOUT_BYTES]),
       value=st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                       st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
                       st.integers(min_value=-(10**400), max_value=10**400)))
def test_parsing_any_json_value_gives_a_value_in_bounds_or_a_bound_error(bound, value):
    try:
        parsed = bound.parse(value, "x")
    except bounds.BoundError:
        return
    assert isinstance(parsed, int) and not isinstance(parsed, bool)
    assert bound.minimum <= parsed <= bound.maximum


@settings(max_examples=200, deadline=None)
@given(ms=st.integers(min_value=1, max_value=bounds.CHECKPOINT_TTL.maximum))
def test_a_ttl_in_bounds_reads_back_exactly_in_every_spelling(ms):
    ttl = bounds.CHECKPOINT_TTL
    assert ttl.parse(ms, "x") == ms == ttl.parse(f"{ms}ms", "x") == ttl.parse(f" {ms}MS ", "x")
    minutes, rest = divmod(ms, 60_000)
    spelled = (f"{minutes}m" if minutes else "") + (f"{rest}ms" if rest else "")
    assert ttl.parse(spelled, "x") == ms


@settings(max_examples=200, deadline=None)
@given(ms=st.integers(min_value=bounds.CHECKPOINT_TTL.maximum + 1, max_value=10**60))
def test_a_ttl_past_the_bound_is_refused_in_every_spelling(ms):
    for value in (ms, f"{ms}ms", float(ms)):
        with pytest.raises(bounds.BoundError) as caught:
            bounds.CHECKPOINT_TTL.parse(value, "checkpointTtl")
        assert "at most" in caught.value.message


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.text(max_size=30),
                        st.integers(min_value=-(10**40), max_value=10**40),
                        st.floats(allow_nan=True, allow_infinity=True),
                        st.from_regex(r"\A[0-9]{1,400}(ms|s|m|h|d|w)?\Z"))


@settings(max_examples=300, deadline=None)
@given(timeout=JSON_VALUES, cap=JSON_VALUES, ttl=JSON_VALUES)
def test_a_request_gives_settings_in_bounds_or_a_request_error(timeout, cap, ttl):
    from vm.service.protocol import RequestError, Settings

    request = {k: v for k, v in (("timeoutMs", timeout), ("maxStdoutBytes", cap),
                                 ("checkpointTtl", ttl)) if v is not None}
    try:
        found = Settings.of_request(request, Options(cwd="/", env={}))
    except RequestError as exc:
        assert exc.envelope["error"]["code"] == "E001"
        return
    assert 200 <= found.timeout_ms <= bounds.TIMEOUT_MS.maximum
    assert 1024 <= found.max_stdout_bytes <= bounds.MAX_STDOUT_BYTES.maximum
    assert found.checkpoint_ttl_ms is None \
        or 1 <= found.checkpoint_ttl_ms <= bounds.CHECKPOINT_TTL.maximum


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=80), st.from_regex(r"\A[0-9]{0,5000}(ms|s|m|h|d|w)?\Z")))
def test_the_cli_duration_flags_give_a_value_in_bounds_or_a_one_line_refusal(text):
    from vm.cli import common
    from vm.service.protocol import RequestError

    try:
        ms = common.timeout(text, "run")
    except RequestError as exc:
        assert exc.envelope["error"]["code"] == "E021"
        assert "\n" not in exc.envelope["error"]["message"]
    else:
        assert 1 <= ms <= bounds.TIMEOUT_MS.maximum
    try:
        seconds = common.seconds(text, "grace")
    except common.Usage as exc:
        assert "\n" not in str(exc)
    else:
        assert 0 <= seconds * 1000 <= bounds.AGE.maximum
