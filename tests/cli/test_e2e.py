"""End to end through the real `lobster` executable, each test in a private state dir."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LOBSTER, ROOT
from vm.service.protocol import Options, handle

ENVELOPE_KEYS = ["protocolVersion", "ok", "status", "output", "requiresApproval", "requiresInput"]
NOT_FOUND = "Pipeline resume state not found"


@pytest.fixture
def cli(cli, tmp_path_factory):
    """The shared fixture, with bytecode caching on (outside the repo): dozens of processes."""
    cli.env.pop("PYTHONDONTWRITEBYTECODE", None)
    cli.env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.getbasetemp() / "pycache")
    return cli


# helpers ------------------------------------------------------------------------------------
def park(cli, pipeline: str) -> dict:
    """Run `pipeline` in process into the fixture's state dir and cwd, with its env: a quick
    way to a real checkpoint when the thing under test is the `lobster resume` after it."""
    options = Options(state_dir=str(cli.state), cwd=str(cli.work), env=dict(cli.env),
                      mode="tool")
    return handle({"action": "run", "pipeline": pipeline}, options)


def approval(envelope: dict) -> dict:
    assert envelope["ok"] is True and envelope["status"] == "needs_approval", envelope
    return envelope["requiresApproval"]


def input_request(envelope: dict) -> dict:
    assert envelope["ok"] is True and envelope["status"] == "needs_input", envelope
    return envelope["requiresInput"]


def resume(cli, token: str, *decision: str) -> tuple[dict, int]:
    return cli.tool("resume", "--token", token, *decision)


def assert_error(result: tuple[dict, int], kind: str, message: str) -> dict:
    envelope, code = result
    assert envelope["ok"] is False, envelope
    assert list(envelope) == ["protocolVersion", "ok", "error"]
    assert envelope["protocolVersion"] == 1
    assert (envelope["error"]["type"], envelope["error"]["message"]) == (kind, message)
    assert code == (2 if kind == "parse_error" else 1)
    return envelope["error"]


def assert_ok(result: tuple[dict, int], output: list, status: str = "ok") -> dict:
    envelope, code = result
    assert envelope == {"protocolVersion": 1, "ok": True, "status": status, "output": output,
                        "requiresApproval": None, "requiresInput": None}
    assert list(envelope) == ENVELOPE_KEYS
    assert code == 0
    return envelope


def token_fields(token: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


def encode_token(fields: dict) -> str:
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def start_all(cli, argvs: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Start every `lobster` call at once (independent calls overlap), then wait for all."""
    procs = [(argv, subprocess.Popen([LOBSTER, *argv], cwd=cli.work, env=cli.env, text=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)) for argv in argvs]
    done = []
    for argv, proc in procs:
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def run_all(cli, argvs: list[list[str]]) -> list[tuple[dict, int]]:
    """`start_all`, then each call's envelope and exit code, in order."""
    results = []
    for proc in start_all(cli, argvs):
        try:
            results.append((json.loads(proc.stdout), proc.returncode))
        except ValueError:
            raise AssertionError(f"not JSON: {proc.stdout!r} stderr={proc.stderr!r}") from None
    return results


def tool_request(request: dict) -> list[str]:
    return ["tool", json.dumps(request)]


def pid_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


GATED = "exec --json echo '[1,2,3]' | approve --prompt 'Go?' | map --wrap v | head --n 2"


# approve ------------------------------------------------------------------------------------
def test_halt_then_approve_runs_the_later_stages_on_the_approved_items(cli):
    envelope, code = cli.pipeline(GATED)
    assert code == 0
    assert list(envelope) == ENVELOPE_KEYS
    assert envelope["output"] == [] and envelope["requiresInput"] is None
    request = approval(envelope)
    assert list(request) == ["type", "prompt", "items", "resumeToken", "approvalId"]
    assert request["type"] == "approval_request"
    assert request["prompt"] == "Go?"
    assert request["items"] == [1, 2, 3]
    assert_ok(resume(cli, request["resumeToken"], "--approve", "yes"), [{"v": 1}, {"v": 2}])


def test_approve_no_cancels_and_nothing_after_the_gate_runs(cli):
    envelope = park(cli, "exec --json echo '[1]' | approve"
                         " | exec --shell 'echo ran >> after.txt'")
    token = approval(envelope)["resumeToken"]
    assert_ok(resume(cli, token, "--approve", "no"), [], status="cancelled")
    assert not (cli.work / "after.txt").exists()
    assert_error(resume(cli, token, "--approve", "yes"), "runtime_error", NOT_FOUND)


def test_approval_id_is_eight_lowercase_hex(cli):
    request = approval(park(cli, "approve"))
    assert re.fullmatch(r"[0-9a-f]{8}", request["approvalId"])


def test_resume_by_approval_id(cli):
    request = approval(park(cli, GATED))
    approval_id = request["approvalId"]
    assert_ok(cli.tool("resume", "--id", approval_id, "--approve", "yes"), [{"v": 1}, {"v": 2}])
    assert_error(cli.tool("resume", "--id", approval_id, "--approve", "yes"), "parse_error",
                 f'Approval ID "{approval_id}" not found or expired')
    assert_error(resume(cli, request["resumeToken"], "--approve", "yes"), "runtime_error",
                 NOT_FOUND)


def test_resume_twice_is_refused(cli):
    token = approval(park(cli, GATED))["resumeToken"]
    assert_ok(resume(cli, token, "--approve", "yes"), [{"v": 1}, {"v": 2}])
    assert_error(resume(cli, token, "--approve", "yes"), "runtime_error", NOT_FOUND)


def test_cancel(cli):
    envelope = park(cli, "exec --json echo '[1]' | approve"
                         " | exec --shell 'echo ran >> after.txt'")
    token = approval(envelope)["resumeToken"]
    assert_ok(resume(cli, token, "--cancel"), [], status="cancelled")
    assert not (cli.work / "after.txt").exists()
    assert_error(resume(cli, token, "--approve", "yes"), "runtime_error", NOT_FOUND)


def test_cancel_of_a_consumed_checkpoint(cli):
    # reference doc 6.3: cancel of missing or already-claimed state -> `Resume state not found`
    token = approval(park(cli, "approve"))["resumeToken"]
    assert_ok(resume(cli, token, "--cancel"), [], status="cancelled")
    assert_error(resume(cli, token, "--cancel"), "runtime_error", "Resume state not found")


def test_a_resume_that_halts_again_returns_a_new_token_and_kills_the_old_one(cli):
    envelope = park(cli, "exec --json echo '[1,2]' | approve --prompt one | map --wrap v"
                         " | approve --prompt two | pick v")
    first = approval(envelope)
    assert first["prompt"] == "one"
    again, code = resume(cli, first["resumeToken"], "--approve", "yes")
    assert code == 0
    second = approval(again)
    assert second["prompt"] == "two"
    assert second["items"] == [{"v": 1}, {"v": 2}]
    assert second["resumeToken"] != first["resumeToken"]
    assert second["approvalId"] != first["approvalId"]
    assert_error(resume(cli, first["resumeToken"], "--approve", "yes"), "runtime_error",
                 NOT_FOUND)
    assert_ok(resume(cli, second["resumeToken"], "--approve", "yes"), [{"v": 1}, {"v": 2}])


# ask ----------------------------------------------------------------------------------------
def test_ask_invalid_answer_keeps_the_checkpoint_then_a_valid_answer_finishes(cli):
    envelope = park(cli, "ask --prompt 'How many?' --schema "
                         "'{\"type\":\"integer\",\"minimum\":1}' | map --wrap n")
    request = input_request(envelope)
    assert request["prompt"] == "How many?"
    assert request["responseSchema"] == {"type": "integer", "minimum": 1}
    token = request["resumeToken"]
    refused = [  # none of these touches the checkpoint, so they may as well run side by side
        (["--response-json", '"three"'],
         "pipeline input response failed schema validation at /: must be integer"),
        (["--response-json", "0"],
         "pipeline input response failed schema validation at /: must be >= 1"),
        (["--response-json", "{nope"], "resume --response-json must be valid JSON"),
        (["--approve", "yes"], "pipeline input resumes require response"),
    ]
    results = run_all(cli, [["resume", "--token", token, *argv] for argv, _ in refused])
    for (_, message), result in zip(refused, results):
        assert_error(result, "parse_error", message)
    assert_ok(resume(cli, token, "--response-json", "3"), [{"n": 3}])
    assert_error(resume(cli, token, "--response-json", "3"), "runtime_error", NOT_FOUND)


def test_ask_default_schema_answer(cli):
    token = input_request(park(cli, "ask"))["resumeToken"]
    wrong_enum, missing = run_all(cli, [
        ["resume", "--token", token, "--response-json", '{"decision":"maybe"}'],
        ["resume", "--token", token, "--response-json", "{}"]])
    assert_error(wrong_enum, "parse_error",
                 "pipeline input response failed schema validation at /decision: "
                 "must be equal to one of the allowed values")
    assert_error(missing, "parse_error", "pipeline input response failed schema validation "
                                         "at /: must have required property 'decision'")
    assert_ok(resume(cli, token, "--response-json", '{"decision":"approve"}'),
              [{"decision": "approve"}])


# tokens -------------------------------------------------------------------------------------
def test_a_tampered_signature_is_refused_and_the_real_token_still_works(cli):
    token = approval(park(cli, GATED))["resumeToken"]
    fields = token_fields(token)
    sig = fields["sig"]
    fields["sig"] = ("A" if sig[0] != "A" else "B") + sig[1:]
    error = assert_error(resume(cli, encode_token(fields), "--approve", "yes"), "parse_error",
                         "Invalid token: signature does not match this state directory")
    assert error["message"].startswith("Invalid token")
    assert_ok(resume(cli, token, "--approve", "yes"), [{"v": 1}, {"v": 2}])


def test_a_token_signed_with_another_key_is_refused(cli):
    from vm.host import token as tokens

    token = approval(park(cli, GATED))["resumeToken"]
    fields = token_fields(token)
    forged = tokens.issue(fields["kind"], fields["stateKey"], os.urandom(32))
    unsigned = encode_token({k: v for k, v in fields.items() if k != "sig"})
    bad_version = encode_token({**fields, "protocolVersion": 2})
    results = run_all(cli, [["resume", "--token", bad, "--approve", "yes"]
                            for bad in (forged, unsigned, "garbage!", bad_version)])
    assert_error(results[0], "parse_error",
                 "Invalid token: signature does not match this state directory")
    envelope, code = results[1]
    assert code == 2 and envelope["error"]["type"] == "parse_error"
    assert envelope["error"]["message"].startswith("Invalid token")
    assert_error(results[2], "parse_error", "Invalid token")
    assert_error(results[3], "parse_error", "Unsupported protocol version")
    assert_ok(resume(cli, token, "--approve", "yes"), [{"v": 1}, {"v": 2}])


def test_a_token_from_another_state_dir_is_refused(cli, tmp_path):
    token = approval(park(cli, GATED))["resumeToken"]
    empty, keyed = tmp_path / "empty-state", tmp_path / "other-state"
    # a checkpoint in the other store gives it a signing key of its own
    handle({"action": "run", "pipeline": "approve"},
           Options(state_dir=str(keyed), cwd=str(cli.work), env=dict(cli.env)))
    argv = ["resume", "--token", token, "--approve", "yes"]
    for other in (empty, keyed):
        proc = cli.run(*argv, env={"LOBSTER_STATE_DIR": str(other)})
        envelope = json.loads(proc.stdout)
        assert proc.returncode == 2 and envelope["error"]["type"] == "parse_error", envelope
        assert envelope["error"]["message"].startswith("Invalid token")
    assert_ok(resume(cli, token, "--approve", "yes"), [{"v": 1}, {"v": 2}])


def test_two_concurrent_resumes_exactly_one_proceeds_and_the_side_effect_happens_once(cli):
    envelope = park(cli, "exec --json echo '[1]' | approve"
                         " | exec --shell 'echo ran >> side.txt; sleep 0.2; echo done'")
    token = approval(envelope)["resumeToken"]
    results = run_all(cli, [["resume", "--token", token, "--approve", "yes"]] * 2)
    outcomes = sorted((env["ok"], env.get("error", {}).get("message"), code)
                      for env, code in results)
    assert outcomes == [(False, NOT_FOUND, 1), (True, None, 0)], results
    winner = next(env for env, _ in results if env["ok"])
    assert winner["output"] == ["done"]
    assert (cli.work / "side.txt").read_text() == "ran\n"


# lobster tool -------------------------------------------------------------------------------
def test_tool_request_as_argument_and_on_stdin(cli):
    run = {"action": "run", "pipeline": GATED, "timeoutMs": 30000}
    envelope, code = cli.tool("tool", json.dumps(run))
    assert code == 0
    token = approval(envelope)["resumeToken"]
    proc = cli.run("tool", "-", stdin=json.dumps({"action": "resume", "token": token,
                                                  "approve": True}))
    assert_ok((json.loads(proc.stdout), proc.returncode), [{"v": 1}, {"v": 2}])
    # without an argument the request is read from stdin too
    proc = cli.run("tool", stdin=json.dumps({"action": "run", "pipeline": "exec echo hi"}))
    assert_ok((json.loads(proc.stdout), proc.returncode), ["hi"])


def test_tool_resume_by_approval_id_and_with_response_json(cli):
    request = approval(park(cli, GATED))
    by_id = {"action": "resume", "approvalId": request["approvalId"], "approve": True}
    assert_ok(cli.tool("tool", json.dumps(by_id)), [{"v": 1}, {"v": 2}])
    token = input_request(park(cli, "ask --schema '{\"type\":\"integer\"}'"))
    token = token["resumeToken"]
    assert_error(cli.tool("tool", json.dumps({"action": "resume", "token": token,
                                              "responseJson": '"x"'})),
                 "parse_error", "pipeline input response failed schema validation at /: "
                                "must be integer")
    assert_ok(cli.tool("tool", json.dumps({"action": "resume", "token": token,
                                           "responseJson": "7"})), [7])


TOOL_ERRORS = [
    ({"action": "run"}, "pipeline required"),
    ({"action": "run", "pipeline": "  "}, "pipeline required"),
    ({"action": "resume", "approve": True}, "token or approvalId required"),
    ({"action": "resume", "token": "t"},
     "resume requires exactly one of approve, responseJson, or cancel: true"),
    ({"action": "resume", "token": "t", "approve": True, "cancel": True},
     "resume requires exactly one of approve, responseJson, or cancel: true"),
    ({"action": "resume", "token": "t", "approve": True, "responseJson": "1"},
     "resume requires exactly one of approve, responseJson, or cancel: true"),
    ({"action": "resume", "token": "t", "responseJson": "{bad"}, "responseJson must be valid JSON"),
    ({"action": "resume", "token": "t", "cancel": False}, "cancel must be true"),
    ({"action": "run", "pipeline": "exec echo hi", "argsJson": "{bad"},
     "run --args-json must be valid JSON"),
    ({"action": "run", "pipeline": "exec pwd", "cwd": "/tmp"}, "cwd must be a relative path"),
    ({"action": "run", "pipeline": "exec pwd", "cwd": "../elsewhere"},
     "cwd must stay within the gateway working directory"),
    ({"action": "run", "pipeline": "exec pwd", "cwd": "sub/../../x"},
     "cwd must stay within the gateway working directory"),
]


def test_tool_request_errors(cli):
    # the checks are the protocol's: the table runs in process, one case through `lobster tool`
    for request, message in TOOL_ERRORS:
        options = Options(state_dir=str(cli.state), cwd=str(cli.work), env=dict(cli.env))
        envelope = handle(request, options)
        assert_error((envelope, 2 if envelope["error"]["type"] == "parse_error" else 1),
                     "parse_error", message)
    [result] = run_all(cli, [tool_request(TOOL_ERRORS[-1][0])])
    assert_error(result, "parse_error", TOOL_ERRORS[-1][1])


def test_tool_request_that_is_not_json(cli):
    envelope, code = cli.tool("tool", "{not json")
    assert code == 2 and envelope["ok"] is False and envelope["error"]["type"] == "parse_error"


def test_relative_cwd_is_used_for_exec(cli):
    (cli.work / "sub" / "deeper").mkdir(parents=True)
    (cli.work / "sub" / "marker.txt").write_text("here\n")
    results = run_all(cli, [
        tool_request({"action": "run", "pipeline": "exec pwd", "cwd": "sub"}),
        tool_request({"action": "run", "pipeline": "exec --shell 'cat marker.txt'", "cwd": "sub"}),
        tool_request({"action": "run", "pipeline": "exec pwd", "cwd": "sub/deeper/.."}),
        tool_request({"action": "run", "pipeline": "exec pwd", "cwd": "."}),
    ])
    sub = str((cli.work / "sub").resolve())
    assert_ok(results[0], [sub])
    assert_ok(results[1], ["here"])
    assert_ok(results[2], [sub])
    assert_ok(results[3], [str(cli.work.resolve())])


# limits -------------------------------------------------------------------------------------
def test_timeout_kills_the_whole_process_group(cli):
    """The run answers at its timeout, not when its children end: the grandchild sleeps far
    longer than the CLI is given (cli.run's own 60 s bound would fail the test first)."""
    line = "echo $$ > sh.pid; sleep 120 & echo $! > sleep.pid; wait"
    request = {"action": "run", "pipeline": f"exec --shell '{line}'", "timeoutMs": 300}
    result = cli.tool("tool", json.dumps(request))
    assert_error(result, "runtime_error", "lobster runtime timed out")
    pids = [int((cli.work / name).read_text()) for name in ("sh.pid", "sleep.pid")]
    deadline = time.monotonic() + 20  # a bound on waiting for the kill to land, not a speed
    while any(pid_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(pid_running(pid) for pid in pids), pids


def _big(stream: str, size: int = 200_000) -> str:
    target = "sys.stdout" if stream == "stdout" else "sys.stderr"
    return f"exec {sys.executable} -c 'import sys; {target}.write(\"a\" * {size})'"


def test_max_stdout_bytes_caps_child_output_and_the_envelope(cli):
    results = run_all(cli, [
        tool_request({"action": "run", "pipeline": _big("stdout"), "maxStdoutBytes": 2048}),
        tool_request({"action": "run", "pipeline": _big("stderr"), "maxStdoutBytes": 2048}),
        # the child writes ~1.5 KB, but the envelope (one pretty line per item) is over 2 KB
        tool_request({"action": "run", "pipeline": "exec seq 1 400", "maxStdoutBytes": 2048}),
        tool_request({"action": "run", "pipeline": _big("stdout", 1500), "maxStdoutBytes": 2048}),
    ])
    assert_error(results[0], "runtime_error", "lobster stdout exceeded maxStdoutBytes")
    assert_error(results[1], "runtime_error", "lobster stderr exceeded maxStdoutBytes")
    assert_error(results[2], "runtime_error", "lobster runtime result exceeded maxStdoutBytes")
    assert_ok(results[3], ["a" * 1500])


# exit codes and human mode ------------------------------------------------------------------
def test_exit_codes(cli):
    cases = [
        (["run", "--mode", "tool", "exec echo hi"], 0),
        (["run", "--mode", "tool", "ask"], 0),  # needs_input is not an error
        (["run", "--mode", "tool", "exec --shell 'exit 3'"], 1),
        (["run", "--mode", "tool", "exec 'unclosed"], 2),
        (["resume", "--approve", "yes"], 2),
    ]
    results = run_all(cli, [argv for argv, _ in cases])
    assert [code for _, code in results] == [code for _, code in cases], results


ROWS = "exec --json echo '[{\"name\":\"ab\",\"n\":1},{\"name\":\"abcdef\",\"n\":22}]'"
PRETTY = '[\n  1,\n  {\n    "a": "b"\n  }\n]\n'
HUMAN = [  # argv, exit code, stdout, first line of stderr
    (["run", "exec --json echo '[1,{\"a\":\"b\"}]'"], 0, PRETTY, None),
    (["exec --json echo '[1,{\"a\":\"b\"}]'"], 0, PRETTY, None),  # bare = run, human mode
    ([f"{ROWS} | table"], 0, "name    n  \n------  ---\nab      1  \nabcdef  22 \n", None),
    ([f"{ROWS} | json"], 0, '[\n  {\n    "name": "ab",\n    "n": 1\n  },\n'
                            '  {\n    "name": "abcdef",\n    "n": 22\n  }\n]\n', None),
    (["exec --json echo '[]' | table"], 0, "(no results)\n", None),
    # `pick` sets a field an item lacks (undefined): the table lists it, JSON leaves it out
    ([f"{ROWS} | pick missing,name | table"], 0,
     "missing  name  \n-------  ------\n         ab    \n         abcdef\n", None),
    ([f"{ROWS} | pick missing | json"], 0, "[\n  {},\n  {}\n]\n", None),
    (["exec --shell 'echo boom >&2; exit 3'"], 1, "", "Error: exec failed (3): boom"),
    (["exec 'unclosed"], 2, "", "Parse error: Unclosed quote"),
    (["nosuch"], 1, "", "Error: Unknown command: nosuch"),
    (["run", "--args-json", "{bad", "exec echo hi"], 2, "",
     "run --args-json must be valid JSON"),  # bare, as the original prints it (D19, D22)
]


PROGRESS = re.compile(r"lobster: step \S+ (started|finished|skipped|halted|failed)\b.*\n")


def test_human_mode_output_and_errors(cli):
    """Human mode's stdout and errors are the original's; on a pipe stderr has no progress
    lines (SPEC 9.19; tests/cli/test_cli_polish.py covers them on a terminal and with --progress)."""
    for (argv, code, stdout, stderr), proc in zip(HUMAN, start_all(cli, [c[0] for c in HUMAN])):
        assert (proc.returncode, proc.stdout) == (code, stdout), argv
        assert not PROGRESS.search(proc.stderr), argv
        if stderr is None:
            assert proc.stderr == "", argv
        else:
            assert proc.stderr.splitlines()[0] == stderr, argv


def test_a_picked_absent_field_is_a_column_until_a_halt_stores_the_run(cli):
    """The original keeps a step's items in memory (a field `pick` set that the item lacks is
    a table column) and persists a paused run as JSON (after the resume it is gone)."""
    steps = (f"steps:\n  - id: s\n    pipeline: {json.dumps(ROWS + ' | pick missing,n')}\n"
             "GATE  - id: t\n    pipeline: table\n    stdin: $s.json\n")
    (cli.work / "straight.lobster").write_text(steps.replace("GATE", ""))
    (cli.work / "paused.lobster").write_text(steps.replace("GATE", "    approval: ok\n"))
    envelope, code = cli.tool("run", "--mode", "tool", "--file", "straight.lobster")
    assert (code, envelope["output"]) == (0, ["missing  n  \n-------  ---\n         1  \n"
                                              "         22 \n"])
    request = approval(cli.tool("run", "--mode", "tool", "--file", "paused.lobster")[0])
    assert request["items"] == [{"n": 1}, {"n": 22}]
    envelope, code = resume(cli, request["resumeToken"], "--approve", "yes")
    assert (code, envelope["output"]) == (0, ["n  \n---\n1  \n22 \n"])


UNWRAPPED = "exec --json echo '[{\"name\":1},true,{}]' | map --unwrap name"


def test_an_unwrap_of_an_absent_field_is_an_undefined_item(cli):
    """The original's `map --unwrap` yields undefined for an item without the field: null in
    JSON, gone once spread or wrapped, an empty line in a child's stdin, no `json` for a step;
    a paused run stores it as null."""
    for stages, stdout in [
            ("map x={{a}}", [{"value": 1, "x": ""}, {"x": ""}, {"x": ""}]),
            ("map --wrap w", [{"w": 1}, {}, {}]),
            ("exec --stdin jsonl wc -l", ["3"]),
            ("exec --stdin raw wc -c", ["3"])]:
        proc = cli.run(f"{UNWRAPPED} | {stages}")
        assert (proc.returncode, json.loads(proc.stdout)) == (0, stdout), stages
    request = approval(cli.tool("run", "--mode", "tool",
                                f"{UNWRAPPED} | approve --preview-from-stdin | map --wrap w")[0])
    assert request["items"] == [1, None, None]
    envelope, code = resume(cli, request["resumeToken"], "--approve", "yes")
    assert (code, envelope["output"]) == (0, [{"w": 1}, {"w": None}, {"w": None}])
    step = "  - id: s\n    pipeline: " + json.dumps(UNWRAPPED + " | head --n 2 | tail") + "\n"
    (cli.work / "one.lobster").write_text("steps:\n" + step.replace(" | tail", " | dedupe"))
    envelope, code = cli.tool("run", "--mode", "tool", "--file", "one.lobster")
    assert (code, envelope["output"]) == (0, [1, None])
    lone = step.replace("head --n 2 | tail", "dedupe | sort --desc | head --n 1")
    (cli.work / "lone.lobster").write_text(
        "steps:\n" + lone + "  - id: t\n    run: echo [$s.json] [$s.stdout]\n")
    envelope, code = cli.tool("run", "--mode", "tool", "--file", "lone.lobster")
    assert (code, envelope["output"]) == (0, ["[] []\n"])
    (cli.work / "last.lobster").write_text("steps:\n" + lone)
    assert cli.tool("run", "--mode", "tool", "--file", "last.lobster")[0]["output"] == []


def test_every_cli_path_writes_undefined_as_json_does(cli):
    """The CLI's envelopes keep a value's undefined, which its JSON writer leaves out (null in
    an array): `lobster tool` run and resume, `lobster resume --id` by approval id and by
    state key, and human mode (tests/service/test_envelope_data.py holds the embedding API)."""
    gated = ("exec --json echo '[{\"a\":1},{}]' | pick b,a | approve --prompt Go"
             " | map --unwrap b")
    envelope, code = cli.tool("tool", json.dumps({"action": "run", "pipeline": UNWRAPPED}))
    assert (code, envelope["output"]) == (0, [1, None, None])
    request = approval(cli.tool("tool", json.dumps({"action": "run", "pipeline": gated}))[0])
    assert request["items"] == [{"a": 1}, {}]
    envelope, code = cli.tool("tool", json.dumps({"action": "resume", "approve": True,
                                                  "token": request["resumeToken"]}))
    assert (code, envelope["output"]) == (0, [None, None])
    request = approval(cli.pipeline(gated)[0])
    envelope, code = cli.tool("resume", "--id", request["approvalId"], "--approve", "yes")
    assert (code, envelope["output"]) == (0, [None, None])
    approval(cli.pipeline(gated)[0])
    [entry] = cli.tool("pending", "--format", "json")[0]
    envelope, code = cli.tool("resume", "--id", entry["stateKey"], "--approve", "yes")
    assert (code, envelope["output"]) == (0, [None, None])
    proc = cli.run(UNWRAPPED)  # human mode: the output as JSON
    assert (proc.returncode, proc.stdout) == (0, "[\n  1,\n  null,\n  null\n]\n")


def test_human_mode_renders_a_compile_error_with_its_source_line(cli):
    # the compiler renders it (vm's CLI only asks the frontend)
    proc = cli.run("exec --json echo hi | wher a=1")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "Error: Unknown command: wher",
        "<pipeline>:1:23: error[E201]: Unknown command: wher",
        "  1 | exec --json echo hi | wher a=1",
        "    |                       ^^^^",
        "  help: did you mean 'where'?",
    ]


def test_human_mode_halt_prints_what_the_original_prints(cli):
    """SPEC 9.13: stdout is the request item (no token); the resume command is on stderr."""
    proc = cli.run("exec --json echo '[1]' | approve --prompt 'Sure?'")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == [{"type": "approval_request", "prompt": "Sure?", "items": [1]}]
    m = re.fullmatch(r"lobster: to continue: lobster resume --id ([0-9a-f]{8}) --approve yes"
                     r"   \(or --approve no\)\n", proc.stderr)
    assert m, proc.stderr
    assert_ok(cli.tool("resume", "--id", m.group(1), "--approve", "yes"), [1])


# help, version, doctor ----------------------------------------------------------------------
def test_help_version_doctor(cli):
    from vm import __version__

    argvs = [["help"], ["--help"], ["help", "where"], ["help", "nosuch"], ["version"],
             ["-v"], ["doctor"]]
    usage, dash_help, where, nosuch, *versions, doctor = start_all(cli, argvs)
    assert usage.returncode == 0
    assert "lobster run" in usage.stdout and "lobster resume" in usage.stdout
    assert dash_help.stdout == usage.stdout
    assert where.returncode == 0
    assert where.stdout.startswith("where — ")
    assert nosuch.returncode == 2
    assert nosuch.stderr.strip() == "Unknown command: nosuch"
    for version in versions:
        assert (version.returncode, version.stdout) == (0, __version__ + "\n")
    assert_ok((json.loads(doctor.stdout), doctor.returncode),
              [{"toolMode": True, "protocolVersion": 1, "version": __version__}])


# the inbox example --------------------------------------------------------------------------
INBOX_PIPELINE = ("exec --json --shell 'inbox list --json'"
                  " | exec --stdin json --json --shell 'inbox categorize --json'"
                  " | pick id,subject,category,proposed"
                  " | approve --preview-from-stdin --limit 5 --prompt 'Apply changes?'"
                  " | exec --stdin json --json --shell 'inbox apply --json'")

EXPECTED_LABELS = {"m1": ["needs-reply"], "m2": ["action-required"], "m3": ["fyi"],
                   "m4": ["work", "needs-reply"], "m5": ["action-required"], "m6": ["fyi"]}


@pytest.fixture
def inbox(cli, tmp_path) -> Path:
    folder = tmp_path / "inbox"
    shutil.copytree(ROOT / "examples" / "inbox", folder)
    cli.env["PATH"] = f"{folder}{os.pathsep}{cli.env['PATH']}"
    cli.env["INBOX_FILE"] = str(folder / "mailbox.json")
    return folder


def test_inbox_example_halts_with_a_preview_and_applies_on_approve(cli, inbox):
    mailbox = inbox / "mailbox.json"
    before = mailbox.read_text()
    envelope, code = cli.pipeline(INBOX_PIPELINE)
    assert code == 0
    request = approval(envelope)
    assert request["prompt"] == "Apply changes?"
    assert [item["id"] for item in request["items"]] == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert [item["category"] for item in request["items"]] == \
        ["reply", "action", "fyi", "reply", "action", "fyi"]
    assert json.loads(request["preview"]) == request["items"][:5]
    assert mailbox.read_text() == before  # nothing applied before the approval
    envelope, code = resume(cli, request["resumeToken"], "--approve", "yes")
    assert code == 0 and envelope["status"] == "ok", envelope
    [summary] = envelope["output"]
    assert (summary["changed"], summary["unchanged"]) == (5, 1)
    after = json.loads(mailbox.read_text())
    assert {m["id"]: m["labels"] for m in after["messages"]} == EXPECTED_LABELS
    # a second triage finds nothing new to label
    envelope = park(cli, INBOX_PIPELINE)
    again = approval(envelope)
    assert all(item["proposed"] == {"addLabels": []} for item in again["items"])


def test_inbox_example_rejected_leaves_the_mailbox_alone(cli, inbox):
    mailbox = inbox / "mailbox.json"
    before = mailbox.read_text()
    token = approval(park(cli, INBOX_PIPELINE))["resumeToken"]
    assert_ok(resume(cli, token, "--approve", "no"), [], status="cancelled")
    assert mailbox.read_text() == before


def test_inbox_cli_errors(inbox):
    exe = str(inbox / "inbox")
    env = {**os.environ, "INBOX_FILE": str(inbox / "mailbox.json")}
    cases = [([exe], None, 2, "usage: inbox (list | categorize | apply) --json"),
             ([exe, "list"], None, 2, "usage: inbox (list | categorize | apply) --json"),
             ([exe, "categorize", "--json"], "not json", 1,
              "inbox: stdin is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
             ([exe, "apply", "--json"], '[{"id": "zz"}]', 1, 'inbox: unknown message id: "zz"')]
    for argv, stdin, code, message in cases:
        proc = subprocess.run(argv, input=stdin or "", env=env, capture_output=True, text=True)
        assert (proc.returncode, proc.stdout, proc.stderr.strip()) == (code, "", message)
    missing = subprocess.run([exe, "list", "--json"], env={**env, "INBOX_FILE": "/nonexistent/m"},
                             capture_output=True, text=True)
    assert (missing.returncode, missing.stderr.strip()) == (1, "inbox: mailbox not found: "
                                                               "/nonexistent/m")


def test_a_signal_kills_the_child_group_and_exits_128_plus_n(cli, tmp_path):
    import signal
    import time

    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen([LOBSTER, "run", "--mode", "tool",
                             f"exec --shell 'echo $$ > {pidfile}; sleep 30'"],
                            cwd=cli.work, env=cli.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err == "Received SIGTERM\n"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the child outlived the signal")


# what the differential tester found (tests/differential/DIVERGENCES.md) ----------------------
def test_file_problems_are_parse_errors_in_the_originals_words(cli):
    (cli.work / "w.txt").write_text("steps: []\n")
    (cli.work / "d.lobster").mkdir()
    for name, message in (("nope.lobster", f"ENOENT: no such file or directory, stat '{cli.work / 'nope.lobster'}'"),
                          ("d.lobster", "Workflow path is not a file"),
                          ("w.txt", "Workflow file must end in .lobster, .yaml, .yml, or .json")):
        env, code = cli.tool("run", "--mode", "tool", "--file", name)
        assert (code, env["error"]["type"], env["error"]["message"]) == (2, "parse_error", message)


def test_a_lone_positional_is_a_workflow_only_when_it_is_a_file(cli):
    # SPEC 9.20: a word written as a path that names no file is a usage error, before the
    # pipeline fallback (the original: `Unknown command: nope.lobster`, exit 1)
    env, code = cli.tool("run", "--mode", "tool", "nope.lobster")
    assert (code, env["error"]["code"], env["error"]["message"]) == (
        2, "E026", "no such file: nope.lobster")


def test_doctor_notes_are_a_list_and_an_empty_approve_is_no_decision(cli):
    env, _ = cli.tool("doctor", "a", "b")
    assert env["output"][0]["notes"] == ["a", "b"]
    env, code = cli.tool("resume", "--token", "x", "--approve", "")
    assert (code, env["error"]["message"]) == (
        2, "resume requires --approve yes|no, --response-json, or --cancel")


def test_args_json_usage_error_is_printed_bare_in_human_mode(cli):
    (cli.work / "w.lobster").write_text("steps:\n  - {id: a, run: echo hi}\n")
    proc = cli.run("run", "--file", "w.lobster", "--args-json", "{bad")
    # the original's line bare, then ours: where the JSON stopped (issue 21, item 6)
    assert (proc.returncode, proc.stderr) == (2, "run --args-json must be valid JSON\n  at line "
                                              "1, column 2: \"b\" (Expecting property name "
                                              "enclosed in double quotes)\n")


def test_max_output_bytes_variable_message_and_check(cli):
    pipeline = "exec --shell 'seq 1 100'"
    for value, message in (("10", "Process output exceeded 10 bytes"),
                           ("1.5", "LOBSTER_MAX_OUTPUT_BYTES must be a positive safe integer (bytes)"),
                           ("0", "LOBSTER_MAX_OUTPUT_BYTES must be a positive safe integer (bytes)")):
        env, code = cli.tool("run", "--mode", "tool", pipeline, env={"LOBSTER_MAX_OUTPUT_BYTES": value})
        assert (code, env["error"]["message"]) == (1, message)
    env, code = cli.tool("run", "--mode", "tool", "commands.list | head --n 1",
                         env={"LOBSTER_MAX_OUTPUT_BYTES": "x"})  # checked only when a child starts
    assert code == 0


def test_tool_envelope_cap_replaces_an_input_subject(cli):
    (cli.work / "w.lobster").write_text("steps:\n  - id: a\n    run: printf '%03000d' 0\n"
                                        "  - id: ask\n    input:\n      prompt: p\n"
                                        "      responseSchema: {type: object}\n")
    env, _ = cli.tool("run", "--mode", "tool", "w.lobster",
                      env={"LOBSTER_MAX_TOOL_ENVELOPE_BYTES": "2000"})
    assert env["requiresInput"]["subject"] == {
        "truncated": True, "bytes": 3002, "preview": "[subject omitted: envelope size limit]"}
    env, _ = cli.tool("run", "--mode", "tool", "w.lobster",
                      env={"LOBSTER_MAX_TOOL_ENVELOPE_BYTES": "1023"})  # under 1024: no cap
    assert env["requiresInput"]["subject"] == "0" * 3000


def test_a_runtime_trap_in_a_sub_workflow_is_rendered_in_its_own_file(cli):
    """Human mode prints a trap like a compile error: the file it happened in, its line and a
    caret, with the same printer."""
    (cli.work / "lib").mkdir()
    (cli.work / "main.lobster").write_text(
        "steps:\n  - id: a\n    run: echo hi\n  - id: b\n    workflow: lib/sub.lobster\n")
    (cli.work / "lib" / "sub.lobster").write_text(
        "steps:\n  - id: x\n    run: echo 1\n  - id: boom\n    run: exit 3\n")
    proc = cli.run("run", "--quiet", "main.lobster")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "Error: workflow command failed (3): exit 3",
        f"{(cli.work / 'lib' / 'sub.lobster').resolve()}:5:10: error[T410]: workflow command "
        "failed (3): exit 3",
        "  5 |     run: exit 3",
        "    |          ^^^^^^",
    ]
    pipeline = cli.run("--quiet", "exec --json --shell 'echo [1]' | exec --shell 'exit 4'")
    assert pipeline.stderr.splitlines()[1:] == [
        "<pipeline>:1:34: error[T410]: exec failed (4): exit 4",
        "  1 | exec --json --shell 'echo [1]' | exec --shell 'exit 4'",
        "    |                                  ^^^^^^^^^^^^^^^^^^^^^",
    ]
