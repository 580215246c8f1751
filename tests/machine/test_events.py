"""Run events: a callback in the embedding API hears each step start, finish, retry, skip,
halt and failure, and children's stderr lines; `--events jsonl` writes the same through the
real CLI. Events never change the envelope."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from attrs import evolve

from vm.engine.events import describe, drain
from vm.service.protocol import Options, handle
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

FLAKY = "#!/bin/sh\n[ -f tried ] && { echo ok; exit 0; }\ntouch tried; echo 'not yet' >&2; exit 1\n"

WORKFLOW = """\
steps:
  - id: build
    run: printf 'line one\\nline two\\n' >&2; echo '{"n":1}'
  - id: never
    when: "false"
    run: echo no
  - id: flaky
    run: ./flaky.sh
    retry:
      max: 2
      delay_ms: 1
  - id: optional
    run: echo broken >&2; exit 7
    on_error: continue
  - id: gate
    approval: Ship it?
  - id: ship
    run: echo shipped
"""


def _setup(tmp_path: Path) -> Options:
    (tmp_path / "w.lobster").write_text(WORKFLOW)
    script = tmp_path / "flaky.sh"
    script.write_text(FLAKY)
    script.chmod(0o755)
    return Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))


def _collect(options: Options) -> tuple[Options, list[dict]]:
    events: list[dict] = []
    return evolve(options, on_event=events.append), events


def _summary(events: list[dict]) -> list[tuple]:
    return [(e["type"], e["step"]) for e in events if e["type"] != "stderr"]


def _stripped(envelope: dict) -> dict:
    """The envelope without what each run makes up (its token and approval id)."""
    text = json.dumps(envelope)
    approval = envelope.get("requiresApproval") or {}
    for made_up in (approval.get("resumeToken"), approval.get("approvalId")):
        if made_up:
            text = text.replace(made_up, "<made up>")
    return json.loads(text)


def test_a_callback_hears_every_step_of_a_run_and_its_resume(tmp_path):
    options, events = _collect(_setup(tmp_path))
    envelope = handle({"action": "run", "pipeline": "w.lobster"}, options)
    assert envelope["status"] == "needs_approval"
    assert _summary(events) == [
        ("started", "build"), ("finished", "build"),
        ("skipped", "never"),
        ("started", "flaky"), ("retried", "flaky"), ("finished", "flaky"),
        ("started", "optional"), ("failed", "optional"),
        ("started", "gate"), ("halted", "gate"),
    ]
    by = {(e["type"], e["step"]): e for e in events}
    assert [e["line"] for e in events if e["type"] == "stderr" and e["step"] == "build"] == \
        ["line one", "line two"]
    build = by["finished", "build"]
    assert (build["exitCode"], build["stdoutBytes"], build["stderrBytes"]) == (0, 8, 18)
    assert build["index"] == 0 and isinstance(build["durationMs"], int)
    assert by["skipped", "never"]["reason"] == "condition false"
    retried = by["retried", "flaky"]
    assert (retried["attempt"], retried["max"], retried["delayMs"], retried["code"]) == \
        (1, 2, 1, "T410")
    assert retried["message"] == "workflow command failed (1): not yet"
    failed = by["failed", "optional"]
    assert (failed["code"], failed["message"], failed["handled"]) == \
        ("T410", "workflow command failed (7): broken", "continue")
    halted = by["halted", "gate"]
    assert halted["kind"] == "approval" and halted["prompt"] == "Ship it?"
    assert halted["approvalId"] == envelope["requiresApproval"]["approvalId"]
    assert [e["ms"] for e in events] == sorted(e["ms"] for e in events)
    assert all(list(e)[:4] == ["type", "step", "index", "ms"] for e in events)

    resumed_options, resumed = _collect(options)
    done = handle({"action": "resume", "approvalId": halted["approvalId"], "approve": True},
                  resumed_options)
    assert done["output"] == ["shipped\n"]
    assert _summary(resumed) == [("started", "ship"), ("finished", "ship")]
    assert resumed[-1]["exitCode"] == 0 and resumed[-1]["index"] == 5


def test_events_never_change_the_envelope(tmp_path):
    quiet = _setup(tmp_path)
    listening, events = _collect(quiet)
    for request in ({"action": "run", "pipeline": "exec --json --shell 'echo [3,1,2]' | sort"},
                    {"action": "run", "pipeline": "exec --shell 'exit 4'"},
                    {"action": "run", "pipeline": "w.lobster"}):
        (tmp_path / "tried").unlink(missing_ok=True)
        plain = handle(request, quiet)
        (tmp_path / "tried").unlink(missing_ok=True)
        heard = handle(request, listening)
        assert _stripped(heard) == _stripped(plain), request
    assert events


def test_inline_pipeline_stages_are_steps_and_a_trap_is_a_failure(tmp_path):
    options, events = _collect(_setup(tmp_path))
    envelope = handle({"action": "run", "pipeline":
                       "exec --json --shell 'echo [1,2,3]' | head --n 2 | exec --shell 'exit 3'"},
                      options)
    assert envelope["error"]["code"] == "T410"
    assert _summary(events) == [("started", "1:exec"), ("finished", "1:exec"),
                                ("started", "2:head"), ("finished", "2:head"),
                                ("started", "3:exec"), ("failed", "3:exec")]
    assert events[1]["exitCode"] == 0 and "exitCode" not in events[3]
    failed = events[-1]
    assert (failed["code"], failed["index"], failed["handled"]) == ("T410", 2, None)
    assert failed["message"] == envelope["error"]["message"]


def test_loops_and_sub_workflows_report_their_steps(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "sub.lobster").write_text("steps:\n  - id: inner\n    run: echo in\n")
    (tmp_path / "w.lobster").write_text(
        "steps:\n  - id: items\n    run: echo '[1,2]'\n"
        "  - id: each\n    for_each: $items.json\n    steps:\n"
        "      - id: one\n        run: echo $LOBSTER_ARG_X\n"
        "  - id: call\n    workflow: lib/sub.lobster\n")
    options, events = _collect(Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s")))
    assert handle({"action": "run", "pipeline": "w.lobster"}, options)["ok"]
    assert _summary(events) == [
        ("started", "items"), ("finished", "items"),
        ("started", "each"), ("started", "each/one"), ("finished", "each/one"),
        ("started", "each/one"), ("finished", "each/one"), ("finished", "each"),
        ("started", "call"), ("started", "call/inner"), ("finished", "call/inner"),
        ("finished", "call"),
    ]


def test_a_raising_callback_is_dropped_and_the_run_goes_on(tmp_path):
    logged: list[str] = []
    calls = []

    def broken(event):
        calls.append(event)
        raise RuntimeError("listener bug")

    options = evolve(_setup(tmp_path), on_event=broken, log=logged.append)
    request = {"action": "run", "pipeline": "exec --json --shell 'echo [1]' | head --n 1"}
    assert handle(request, options) == handle(request, evolve(options, on_event=None))
    assert len(calls) == 1
    assert logged == ["lobster: the event callback failed and is no longer called: "
                      "RuntimeError: listener bug\n"]


def test_a_slow_callback_delays_no_step(tmp_path):
    """The callback runs on a thread of its own: a run bounded by 1 s finishes while the
    listener takes 0.3 s per event, and every event still arrives, in order (the end of the
    run waits only DRAIN_S for them: the rest arrive after it returned)."""
    heard: list[dict] = []
    release = threading.Event()

    def slow(event):
        release.wait(0.3)
        heard.append(event)

    options = evolve(_setup(tmp_path), on_event=slow, timeout_ms=1000)
    pipeline = " | ".join(["exec --json --shell 'echo [1]'"] + ["head --n 1"] * 5)
    envelope = handle({"action": "run", "pipeline": pipeline}, options)
    assert envelope["output"] == [1] and "eventsDropped" not in envelope
    assert drain(slow, 60)
    assert [e["type"] for e in heard] == ["started", "finished"] * 6


def test_concurrent_runs_each_hear_their_own_events(tmp_path):
    base = _setup(tmp_path)
    results: dict[int, list[dict]] = {}

    def one(n: int) -> None:
        options, events = _collect(base)
        handle({"action": "run", "pipeline": f"exec --json --shell 'echo [{n}]'"}, options)
        results[n] = events

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(4):
        assert _summary(results[n]) == [("started", "1:exec"), ("finished", "1:exec")]
        assert results[n][1]["stdoutBytes"] == len(f"[{n}]\n")


def test_describe_writes_one_line_per_shown_event():
    assert describe({"type": "started", "step": "a"}) == "lobster: step a started"
    assert describe({"type": "finished", "step": "a", "durationMs": 5, "exitCode": 0,
                     "stdoutBytes": 3, "stderrBytes": 0}) == \
        "lobster: step a finished in 5 ms (exit 0, 3 bytes out, 0 bytes err)"
    assert describe({"type": "finished", "step": "2:head", "durationMs": 1}) == \
        "lobster: step 2:head finished in 1 ms"
    assert describe({"type": "skipped", "step": "b", "reason": "condition false"}) == \
        "lobster: step b skipped (condition false)"
    assert describe({"type": "failed", "step": "c", "message": "boom", "handled": "continue"}) \
        == "lobster: step c failed: boom (on_error: continue)"
    assert describe({"type": "retried", "step": "c"}) is None  # the run prints [RETRY]
    assert describe({"type": "stderr", "step": "c", "line": "x"}) is None


# the real CLI --------------------------------------------------------------------------------
def test_events_jsonl_through_the_cli_with_real_children(cli):
    (cli.work / "w.lobster").write_text(WORKFLOW)
    (cli.work / "flaky.sh").write_text(FLAKY)
    (cli.work / "flaky.sh").chmod(0o755)
    proc = cli.run("run", "--mode", "tool", "--events", "jsonl", "w.lobster")
    assert proc.returncode == 0
    envelope = json.loads(proc.stdout)
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert _summary(lines)[-2:] == [("started", "gate"), ("halted", "gate")]
    assert ("stderr", "build", "line one") in [(e["type"], e["step"], e.get("line"))
                                               for e in lines]
    assert lines[-1]["approvalId"] == envelope["requiresApproval"]["approvalId"]
    # the same run without events: the same envelope, and no event lines
    (cli.work / "tried").unlink()
    plain = cli.run("run", "--mode", "tool", "w.lobster")
    assert _stripped(json.loads(plain.stdout)) == _stripped(envelope)
    assert not [line for line in plain.stderr.splitlines() if line.startswith("{")]

    resumed = cli.run("resume", "--id", envelope["requiresApproval"]["approvalId"],
                      "--approve", "yes", "--events", "jsonl")
    assert json.loads(resumed.stdout)["output"] == ["shipped\n"]
    assert _summary([json.loads(line) for line in resumed.stderr.splitlines()]) == \
        [("started", "ship"), ("finished", "ship")]


def test_events_jsonl_in_human_mode_replaces_the_progress_lines(cli):
    proc = cli.run("run", "--events", "jsonl", "exec --json --shell 'echo [1]'")
    assert proc.stdout == "[\n  1\n]\n"
    events = [json.loads(line) for line in proc.stderr.splitlines()]
    assert _summary(events) == [("started", "1:exec"), ("finished", "1:exec")]


def test_the_event_stream_is_flushed_before_the_process_ends(cli):
    """Even a run that fails writes every event before its error line."""
    proc = cli.run("run", "--events", "jsonl", "exec --shell 'echo bad >&2; exit 2'")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1
    assert [json.loads(line)["type"] for line in lines[:3]] == ["started", "stderr", "failed"]
    assert lines[3] == "Error: exec failed (2): bad"
