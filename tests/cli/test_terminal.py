"""Halts at a terminal (issue 21, item 3): with stdin and stderr on a terminal, a halt shows
what waits and asks (approvals and input gates alike), a decline ends calmly, and progress
shows counts. The formatting is tested in process; a few runs go through a real
pseudo-terminal, as a person would meet them."""

from __future__ import annotations

import io
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LOBSTER

from vm.cli import terminal
from vm.service.protocol.resuming import Decision

SCHEMA = {"type": "object", "properties": {
    "colour": {"type": "string", "enum": ["red", "green"]},
    "count": {"type": "integer", "default": 2}}, "required": ["colour"]}

WORKFLOW = """\
name: ship
steps:
  - id: list
    run: echo '[{"a":1},{"a":2},{"a":3},{"a":4},{"a":5},{"a":6},{"a":7}]'
  - id: gate
    approval: Ship these?
    stdin: $list.json
  - id: after
    run: echo shipped
"""

INPUT = """\
name: pick
steps:
  - id: q
    input:
      prompt: Pick a colour
      responseSchema:
        type: object
        properties:
          colour: {type: string, enum: [red, green]}
        required: [colour]
  - id: after
    run: echo "got it"
"""

LOOP = """\
name: loop
steps:
  - id: list
    run: echo '[1,2,3]'
  - id: each
    for_each: $list.json
    steps:
      - id: show
        run: echo item
"""


# formatting -----------------------------------------------------------------------------------
def test_fit_keeps_one_line_within_the_width():
    assert terminal.fit("a\n  b\tc", 20) == "a b c"
    assert terminal.fit("x" * 30, 10) == "x" * 9 + "…"


def test_fit_shows_control_characters_escaped():
    assert terminal.fit("red\x1b[2Jgone\x07", 40) == "red\\x1b[2Jgone\\x07"


def test_approval_lines_show_the_first_items_and_count_the_rest():
    lines = terminal.approval_lines({"items": [{"n": i} for i in range(8)] + ["text"]}, 40)
    assert lines[0] == "9 items:"
    assert lines[1:6] == [f'  {{"n":{i}}}' for i in range(5)]
    assert lines[6] == "  ... and 4 more"


def test_approval_lines_cut_long_items_to_the_terminal():
    lines = terminal.approval_lines({"items": ["word " * 40]}, 30)
    assert lines == ["1 item:", "  " + ("word " * 40)[:27] + "…"]
    assert all(len(line) <= 30 for line in lines)


def test_approval_lines_take_items_a_step_printed_that_are_no_list():
    """A workflow step that prints its own request passes its items on as printed."""
    assert terminal.approval_lines({"items": 5}, 80) == ["1 item:", "  5"]
    assert terminal.approval_lines({"items": "abc", "preview": 7}, 80) == ["1 item:", "  abc"]
    assert terminal.approval_lines({"items": [], "preview": 7}, 80) == []


def test_approval_lines_fall_back_to_the_preview():
    preview = "\n".join(f"line {i}" for i in range(7))
    assert terminal.approval_lines({"items": [], "preview": preview}, 80) == [
        "preview:", "  line 0", "  line 1", "  line 2", "  line 3", "  line 4",
        "  ... and 2 more lines"]
    assert terminal.approval_lines({"items": []}, 80) == []


def test_field_lines_give_each_field_its_type_and_default():
    assert terminal.field_lines(SCHEMA) == [
        '  colour  one of: "red", "green", required',
        "  count   integer, default 2"]
    assert terminal.field_lines({"type": "array", "items": {"type": "string"}}) == [
        "  answer: array of string"]


def test_input_lines_say_how_to_answer():
    lines = terminal.input_lines({"prompt": "Pick", "responseSchema": SCHEMA,
                                  "subject": {"text": "a\nb"}}, 80)
    assert lines[:5] == ["Pick", "subject:", "  a", "  b", "fields:"]
    assert lines[-1] == "answer with the colour, or with JSON"
    lines = terminal.input_lines({"prompt": "Pick", "responseSchema": SCHEMA,
                                  "defaults": {"colour": "red"}}, 80)
    assert lines[-1] == 'answer with the colour, or with JSON; an empty line takes {"colour":"red"}'
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}},
              "required": ["n"]}
    assert terminal.input_lines({"responseSchema": schema}, 80)[-1] == \
        'answer with JSON; an empty line takes {"n":1}'


def test_a_plain_answer_fills_the_single_string_field():
    request = {"responseSchema": SCHEMA}
    assert terminal.read_answer("red\n", request) == (True, {"colour": "red"}, None)
    assert terminal.read_answer('{"colour":"green","count":3}', request) == (
        True, {"colour": "green", "count": 3}, None)
    assert terminal.read_answer('"green"', {"responseSchema": {"type": "string"}}) == (
        True, "green", None)


def test_an_invalid_answer_says_why_with_the_allowed_values():
    valid, _, why = terminal.read_answer("blue", {"responseSchema": SCHEMA})
    assert not valid
    assert why == ('not valid at /colour: must be equal to one of the allowed values; '
                   'allowed: "red", "green"')
    valid, _, why = terminal.read_answer('{"colour": 5}', {"responseSchema": SCHEMA})
    assert (valid, why) == (False, "not valid at /colour: must be string")


def test_an_answer_that_must_be_json_and_is_not():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    valid, _, why = terminal.read_answer("{n: 1}", {"responseSchema": schema})
    assert not valid and why == "not JSON (Expected property name or '}' in JSON at position 1)"


def test_an_empty_answer_takes_the_defaults_or_is_asked_again():
    assert terminal.read_answer("\n", {"responseSchema": SCHEMA, "defaults": {"colour": "red"}}
                                ) == (True, {"colour": "red"}, None)
    assert terminal.read_answer("", {"responseSchema": SCHEMA}) == (
        False, None, "an answer is required")


def test_progress_text_carries_the_counts():
    started = {"type": "started", "step": "loop/check", "position": 2, "steps": 3, "item": 40,
               "items": 500}
    counts = terminal.counts_of(started)
    assert counts == "step 2/3 · item 40/500"
    assert terminal.progress_text(started, counts) == \
        "lobster: step 2/3 · item 40/500 · loop/check started"
    assert terminal.counts_of({"type": "finished", "step": "a"}) is None


def test_progress_rewrites_one_line_and_clears_it():
    stream = io.StringIO()
    progress = terminal.Progress(stream)
    progress({"type": "started", "step": "a", "index": 0, "position": 1, "steps": 2})
    progress({"type": "finished", "step": "a", "index": 0, "durationMs": 3})
    progress({"type": "started", "step": "a/b", "index": 1, "position": 1, "steps": 2,
              "item": 1, "items": 1})
    progress({"type": "finished", "step": "a", "index": 0, "durationMs": 4})
    progress.pause()
    progress({"type": "started", "step": "c", "index": 2, "position": 2, "steps": 2})
    progress.close()
    assert stream.getvalue() == (
        "\r\x1b[Klobster: step 1/2 · a started"
        "\r\x1b[Klobster: step 1/2 · a finished in 3 ms"
        "\r\x1b[Klobster: step 1/2 · item 1/1 · a/b started"
        "\r\x1b[Klobster: step 1/2 · a finished in 4 ms\r\x1b[K")


# settle: the halts of a run, answered -------------------------------------------------------------
def _halted(kind: str, token: str = "t1") -> dict:
    if kind == "approval":
        return {"ok": True, "status": "needs_approval", "requiresInput": None,
                "requiresApproval": {"prompt": "Go?", "items": [1], "resumeToken": token}}
    return {"ok": True, "status": "needs_input", "requiresApproval": None,
            "requiresInput": {"prompt": "Pick", "responseSchema": SCHEMA, "resumeToken": token}}


def _settle(envelope: dict, lines: list[str], answers: list[dict]):
    said, asked, decisions = [], [], []

    def answer(halt, decision):
        decisions.append((halt["resumeToken"], decision))
        return answers.pop(0)

    def ask(prompt):
        asked.append(prompt)
        return lines.pop(0)

    end = terminal.settle(envelope, answer, ask, said.append, 80)
    return end, said, asked, decisions


def test_settle_asks_a_printed_prompt_of_any_type_as_javascript_shows_it():
    """A workflow step that printed its own request may give a prompt of any JSON type; the
    question shows it as the original's does (String(prompt))."""
    done = {"ok": True, "status": "ok", "output": []}
    for prompt, shown in ((True, "true"), (["x", 2], "x,2"), ({"q": 1}, "[object Object]"),
                          (5, "5")):
        halted = _halted("approval")
        halted["requiresApproval"]["prompt"] = prompt
        _, _, asked, _ = _settle(halted, ["n\n"], [done])
        assert asked == [f"{shown} [y/N] "]


def test_settle_answers_each_halt_until_the_run_ends():
    done = {"ok": True, "status": "ok", "output": []}
    end, said, asked, decisions = _settle(_halted("approval"), ["y\n", "blue\n", "red\n"],
                                          [_halted("input", "t2"), done])
    assert end is done
    assert asked == ["Go? [y/N] ", "> ", "> "]
    assert decisions == [("t1", Decision(approve=True)),
                         ("t2", Decision(response={"colour": "red"}, has_response=True))]
    assert said[0] == "1 item:\n  1"
    assert said[-1].startswith("  not valid at /colour") and said[-1].endswith("; try again")


def test_settle_declines_on_anything_but_yes():
    cancelled = {"ok": True, "status": "cancelled", "output": []}
    _, _, _, decisions = _settle(_halted("approval"), ["\n"], [cancelled])
    assert decisions == [("t1", Decision(approve=False))]


def test_a_refused_answer_leaves_the_run_waiting_and_says_why():
    halted = _halted("approval")
    refused = {"ok": False, "error": {"type": "parse_error", "code": "E513",
                                      "message": "needs an approver"}}
    end, said, _, _ = _settle(halted, ["y\n"], [refused])
    assert end is halted and said[-1] == "lobster: needs an approver"
    # a parse error that is not a refusal of the answer (the token went bad) is the end
    gone = {"ok": False, "error": {"type": "parse_error", "code": "E501",
                                   "message": "Invalid token"}}
    assert _settle(halted, ["y\n"], [gone])[0] is gone
    failed = {"ok": False, "error": {"type": "runtime_error", "message": "boom"}}
    assert _settle(halted, ["y\n"], [failed])[0] is failed  # the run itself failed


def test_a_halt_that_asked_to_be_emitted_is_not_asked():
    halted = _halted("approval")
    said, asked = [], []
    end = terminal.settle(halted, None, asked.append, said.append, 80, emitted=lambda: True)
    assert end is halted and said == [] and asked == []


def test_the_end_of_input_leaves_the_run_waiting():
    halted = _halted("input")
    end, _, _, decisions = _settle(halted, [""], [])
    assert end is halted and decisions == []


def test_a_halt_on_undefined_items_is_shown_as_its_json_carries_it(tmp_path):
    """The CLI's envelope keeps a value's undefined (`run_js`): the terminal shows the items
    as the halt's JSON has them, an undefined item null, an undefined property absent."""
    from vm.service.protocol import Options
    from vm.service.protocol.resuming import resume_js
    from vm.service.protocol.running import run_js

    options = Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path), env={})
    halted = run_js("exec --json echo '[{\"a\":1},{}]' | pick b,a | map --unwrap b"
                    " | approve --prompt Go", options)
    said: list[str] = []
    end = terminal.settle(halted, lambda halt, decision: resume_js(
        options, decision, token=halt["resumeToken"]), lambda prompt: "y\n", said.append, 80)
    assert said == ["2 items:\n  null\n  null"]
    assert end["status"] == "ok" and len(end["output"]) == 2
    halted = run_js("exec --json echo '[{\"a\":1},{}]' | pick b,a | approve --prompt Go",
                    options)
    terminal.settle(halted, lambda halt, decision: resume_js(
        options, decision, token=halt["resumeToken"]), lambda prompt: "n\n", said.append, 80)
    assert said[-1] == '2 items:\n  {"a":1}\n  {}'


def test_detail_lines_show_positions_excerpts_and_allowed_values():
    error = {"detail": {"excerpt": "hello\nworld", "chars": 260, "line": 1, "column": 1,
                        "char": "h", "reason": "Expecting value"}}
    assert terminal.detail_lines(error) == [
        '  output: "hello\\nworld" ... (249 more characters)',
        '  at line 1, column 1: "h" (Expecting value)']
    assert terminal.detail_lines({"detail": {"line": 2, "column": 1, "char": None,
                                             "reason": "Expecting value"}}) == [
        "  at line 2, column 1: the end of the text (Expecting value)"]
    assert terminal.detail_lines({"detail": {"path": "/c", "allowed": ["a", 1]}}) == [
        '  at /c: allowed: "a", 1']
    assert terminal.detail_lines({"detail": {"reason": "/ok must be boolean"}}) == [
        "  reason: /ok must be boolean"]
    assert terminal.detail_lines({"message": "x"}) == []


# through a real pseudo-terminal ---------------------------------------------------------------
class Terminal:
    """`lobster` as a child process with stdin and stderr on a pseudo-terminal (stdout too,
    unless `stdout` is given), read as a person's screen would show it."""

    def __init__(self, argv: list[str], cwd: Path, env: dict, stdout=None) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen([LOBSTER, *argv], cwd=cwd, env=env, stdin=slave,
                                     stdout=stdout if stdout is not None else slave,
                                     stderr=slave, close_fds=True)
        os.close(slave)
        self.screen = b""

    def read_until(self, marker: bytes, timeout: float = 30) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.screen:
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"no {marker!r} on the terminal: {self.screen!r}")
        return self.screen

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self, timeout: float = 30) -> tuple[int, bytes]:
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            pass
        code = self.proc.wait(timeout=max(deadline - time.monotonic(), 1))
        os.close(self.master)
        return code, self.screen

    def _read(self, left: float) -> bool:
        if left <= 0:
            return False
        ready, _, _ = select.select([self.master], [], [], left)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed its end
            return False
        self.screen += data
        return bool(data)


@pytest.fixture
def term(cli):
    (cli.work / "ship.lobster").write_text(WORKFLOW)
    (cli.work / "pick.lobster").write_text(INPUT)
    (cli.work / "loop.lobster").write_text(LOOP)
    env = {**cli.env, "TERM": "xterm", "COLUMNS": "80"}
    return lambda *argv, **kw: Terminal(list(argv), cli.work, env, **kw)


def test_a_workflow_approval_shows_its_items_and_a_decline_ends_calmly(term):
    session = term("run", "--file", "ship.lobster")
    screen = session.read_until(b"[y/N] ")
    before = screen[: screen.index(b"Ship these?")]
    assert b"\r\x1b[K7 items:" in before  # the progress line is cleared first
    assert b'{"a":1}' in before and b"... and 2 more" in before
    session.type("n")
    code, screen = session.finish()
    assert code == 1
    assert screen.rstrip().endswith(b"cancelled")
    assert b"error[" not in screen and b"Not approved" not in screen


def test_a_pipeline_approval_answered_yes_prints_the_output(term):
    session = term("run", 'exec --json --shell "echo [1,2]" | approve --prompt Apply?')
    screen = session.read_until(b"Apply? [y/N] ")
    assert b"2 items:\r\n  1\r\n  2\r\n" in screen
    session.type("yes")
    code, screen = session.finish()
    assert code == 0
    assert screen.split(b"Apply? [y/N] yes\r\n", 1)[1].replace(b"\r\x1b[K", b"") == \
        b"[\r\n  1,\r\n  2\r\n]\r\n"


def test_an_input_gate_asks_again_until_the_answer_fits(term):
    session = term("run", "--file", "pick.lobster")
    screen = session.read_until(b"> ")
    assert b'colour  one of: "red", "green", required' in screen
    session.type("blue")
    screen = session.read_until(b"try again")
    assert b'allowed: "red", "green"' in screen
    session.type("green")
    code, screen = session.finish()
    assert code == 0 and b"got" in screen


def test_with_stdout_on_a_pipe_the_output_stays_clean(term):
    session = term("run", 'exec --json --shell "echo [3]" | approve --prompt Apply?',
                   stdout=subprocess.PIPE)
    session.read_until(b"[y/N] ")
    session.type("y")
    code, _ = session.finish()
    assert code == 0
    assert session.proc.stdout.read() == b"[\n  3\n]\n"


def test_a_for_each_shows_its_counts_and_the_line_is_cleared(term):
    code, screen = term("run", "--file", "loop.lobster", stdout=subprocess.PIPE).finish()
    assert code == 0
    text = screen.decode()
    assert "\r\x1b[Klobster: step 1/2 · list started" in text
    for n in (1, 2, 3):
        assert f"\r\x1b[Klobster: step 2/2 · item {n}/3 · each/show started" in text
    assert text.endswith("\r\x1b[K") and "\n" not in text


def test_an_emitted_approve_halts_even_at_a_terminal(term):
    session = term("run", 'exec --json --shell "echo [1]" | approve --prompt A? | '
                          'approve --emit --prompt B?', stdout=subprocess.PIPE)
    session.read_until(b"A? [y/N] ")
    session.type("y")
    code, screen = session.finish()
    assert code == 0 and b"B?" not in screen
    assert b"lobster: to continue: lobster resume --id " in screen
    out = session.proc.stdout.read()
    assert b'"prompt": "B?"' in out and b'"type": "approval_request"' in out
