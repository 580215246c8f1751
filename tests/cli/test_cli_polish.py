"""Command-line polish, through the real executables: flags after the file, help for run and
resume, lobsterc --help/--version and lint -, --approve true|false, unknown --mode, running
.lbc and .pipeline files, the resume hint at a halt, --timeout, progress lines, completion."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess

import pytest

from conftest import LOBSTER, LOBSTERC
from vm import __version__

WORKFLOW = ("args:\n  who:\n    default: you\nsteps:\n"
            "  - id: greet\n    run: echo \"hi $LOBSTER_ARG_WHO\"\n")
GATED = ("steps:\n  - id: plan\n    run: echo planned\n  - id: gate\n    approval: Go?\n"
         "  - id: go\n    run: echo went\n")
ASKING = ("steps:\n  - id: ask\n    input:\n      prompt: Name?\n      responseSchema:\n"
          "        type: object\n        properties:\n          name: {type: string}\n"
          "        required: [name]\n")


def test_flags_may_follow_the_file(cli):
    (cli.work / "w.lobster").write_text(WORKFLOW)
    for argv in (["run", "w.lobster", "--args-json", '{"who":"bo"}'],
                 ["run", "w.lobster", "--args-json", '{"who":"bo"}', "--mode", "tool"],
                 ["run", "--mode", "tool", "w.lobster", "--args-json={\"who\":\"bo\"}"],
                 ["w.lobster", "--mode=tool", "--args-json", '{"who":"bo"}']):
        proc = cli.run(*argv)
        assert proc.returncode == 0, (argv, proc.stderr)
        out = json.loads(proc.stdout)
        assert (out["output"] if isinstance(out, dict) else out) == ["hi bo\n"], argv
    # a quoted pipeline followed by our flags
    env, code = cli.tool("run", "exec --json --shell 'echo [7]'", "--mode", "tool")
    assert (code, env["output"]) == (0, [7])
    # several pipeline words: the flags after them are the pipeline's, as before
    proc = cli.run("run", "--mode", "tool", "exec", "--json", "--shell", "echo [8]")
    assert json.loads(proc.stdout)["output"] == [8]


def test_help_run_and_resume(cli):
    for argv, first in ((["help", "run"], "usage: lobster run [options]"),
                        (["run", "--help"], "usage: lobster run [options]"),
                        (["help", "resume"], "usage: lobster resume (--token T | --id ID)"),
                        (["resume", "-h"], "usage: lobster resume (--token T | --id ID)")):
        proc = cli.run(*argv)
        assert proc.returncode == 0 and proc.stdout.startswith(first), argv
    text = cli.run("help", "run").stdout
    for flag in ("--mode", "--args-json", "--dry-run", "--timeout", "--quiet", "--events",
                 ".lbc", ".pipeline"):
        assert flag in text
    assert "--approve yes|no" in cli.run("help", "resume").stdout
    assert "lobster completion bash|zsh" in cli.run("help").stdout


def test_lobsterc_help_and_version(cli):
    proc = cli.run("--version", exe=LOBSTERC)
    assert (proc.returncode, proc.stdout) == (0, f"{__version__}\n")  # as `lobster --version`
    helped = cli.run("--help", exe=LOBSTERC)
    assert helped.returncode == 0
    for word in ("compile", "dis", "lint", "graph", "schema", "--version", "Exit codes"):
        assert word in helped.stdout
    assert "- reads stdin" in cli.run("lint", "--help", exe=LOBSTERC).stdout
    assert cli.run("version").stdout == f"{__version__}\n"


def test_lobsterc_lint_reads_stdin(cli):
    (cli.work / "lib").mkdir()
    (cli.work / "lib" / "sub.lobster").write_text(
        "steps:\n  - id: s\n    run: echo sub\n    timeout_ms: 100\n")
    workflow = ("steps:\n  - id: a\n    workflow: lib/sub.lobster\n"
                "  - id: b\n    run: cat\n    stdin: $nope.json\n    timeout_ms: 100\n")
    proc = cli.run("lint", "-", exe=LOBSTERC, stdin=workflow)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "<stdin>:6:12: error[E211]: Unknown step reference: nope.json",
        "  6 |     stdin: $nope.json",
        "    |            ^^^^^^^^^^",
        "1 error, 0 warnings"]
    pipe = cli.run("lint", "-", "--format", "json", exe=LOBSTERC, stdin="exec --bogus x\n")
    found = json.loads(pipe.stdout)
    assert (pipe.returncode, found[0]["file"], found[0]["code"]) == (1, "<stdin>", "E202")
    clean = cli.run("lint", "-", exe=LOBSTERC, stdin="exec --json --shell 'echo [1]'\n")
    assert (clean.returncode, clean.stdout) == (0, "")
    forced = cli.run("lint", "-", "--stdin-kind", "pipeline", exe=LOBSTERC,
                     stdin="steps: x\n")
    assert "<stdin>:1:1: error[E201]: Unknown command: steps:" in forced.stdout
    assert sorted(os.listdir(cli.work)) == ["lib"]  # nothing left behind
    github = cli.run("lint", "-", "--format", "github", exe=LOBSTERC, stdin=workflow)
    assert github.stdout.startswith("::error file=<stdin>,line=6,col=12,"), github.stdout
    prints = set()
    for _ in range(2):  # no temporary name in the output or in a fingerprint
        sarif = json.loads(cli.run("lint", "-", "--format", "sarif", exe=LOBSTERC,
                                   stdin=workflow).stdout)
        [result] = sarif["runs"][0]["results"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "<stdin>"
        prints.add(result["partialFingerprints"]["lobsterc/v1"])
    assert len(prints) == 1


def test_approve_true_and_false(cli):
    (cli.work / "g.lobster").write_text(GATED)
    for word, status in (("true", "ok"), ("FALSE", "cancelled"), ("yes", "ok")):
        env, _ = cli.tool("run", "--mode", "tool", "g.lobster")
        done, code = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"],
                              "--approve", word)
        assert (code, done["status"]) == (0, status), word
    env, _ = cli.tool("run", "--mode", "tool", "g.lobster")
    bad, code = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"],
                         "--approve", "maybe")
    assert (code, bad["error"]["message"]) == (2, "resume --approve must be yes or no")


def test_an_unknown_mode_is_refused_in_one_line(cli):
    for argv in (["run", "--mode", "toll", "exec echo hi"], ["run", "--mode=json", "x"],
                 ["--mode", "Tool", "exec echo hi"]):
        proc = cli.run(*argv)
        mode = argv[argv.index("--mode") + 1] if "--mode" in argv else argv[1].split("=")[1]
        assert (proc.returncode, proc.stdout) == (2, ""), argv
        assert proc.stderr == (f"lobster: error[E020]: run --mode must be tool or human "
                               f"(got '{mode}')\n"), argv


def test_compiled_programs_and_pipeline_files_run(cli):
    (cli.work / "w.lobster").write_text(WORKFLOW)
    (cli.work / "p.pipeline").write_text("exec --json --shell 'echo [3,1,2]' | sort\n")
    assert cli.run("compile", "w.lobster", "-o", "w.lbc", exe=LOBSTERC).returncode == 0
    assert cli.run("compile", "p.pipeline", "-o", "p.lbc", exe=LOBSTERC).returncode == 0
    env, _ = cli.tool("run", "--mode", "tool", "w.lbc", "--args-json", '{"who":"lbc"}')
    assert env["output"] == ["hi lbc\n"]
    env, _ = cli.tool("run", "--mode", "tool", "p.lbc")
    assert env["output"] == [1, 2, 3]
    env, _ = cli.tool("run", "--mode", "tool", "p.pipeline")
    assert env["output"] == [1, 2, 3]
    human = cli.run("run", "--quiet", "p.pipeline")
    assert (human.stdout, human.stderr) == ("[\n  1,\n  2,\n  3\n]\n", "")
    # a halted .lbc run resumes like any other
    (cli.work / "g.lobster").write_text(GATED)
    cli.run("compile", "g.lobster", exe=LOBSTERC)
    env, _ = cli.tool("run", "--mode", "tool", "g.lbc")
    done, _ = cli.tool("resume", "--token", env["requiresApproval"]["resumeToken"],
                       "--approve", "yes")
    assert done["output"] == ["went\n"]
    (cli.work / "junk.lbc").write_bytes(b"\x00not a program")
    bad, code = cli.tool("run", "--mode", "tool", "junk.lbc")
    assert (code, bad["error"]["code"]) == (2, "E023")
    assert bad["error"]["message"].startswith("junk.lbc is not a compiled Lobster program: ")


def test_a_halt_in_human_mode_prints_the_resume_command(cli):
    (cli.work / "g.lobster").write_text(GATED)
    proc = cli.run("run", "g.lobster")
    shown = json.loads(proc.stdout)
    hint = proc.stderr.splitlines()[-1]
    approval_id = shown["requiresApproval"]["approvalId"]
    assert hint == (f"lobster: to continue: lobster resume --id {approval_id} --approve yes"
                    "   (or --approve no)")
    command = hint.split("lobster: to continue: ")[1].split("   (")[0].split()
    done, _ = cli.tool(*command[1:])
    assert done["output"] == ["went\n"]

    (cli.work / "ask.lobster").write_text(ASKING)
    proc = cli.run("run", "ask.lobster")
    token = json.loads(proc.stdout)["requiresInput"]["resumeToken"]
    hint = proc.stderr.splitlines()[-1]
    assert hint == (f"lobster: to continue: lobster resume --token {token} "
                    "--response-json '{\"name\":\"\"}'")
    answered = subprocess.run(["sh", "-c", hint.split(": ", 2)[2].replace(
        "lobster ", f"{LOBSTER} ", 1).replace('""', '"ada"')], cwd=cli.work, env=cli.env,
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert json.loads(answered.stdout)["output"] == [{"name": "ada"}]
    quiet = cli.run("run", "--quiet", "g.lobster")
    assert quiet.stderr == ""


def test_timeout_bounds_run_and_resume(cli):
    (cli.work / "slow.lobster").write_text(
        "steps:\n  - id: gate\n    approval: Go?\n  - id: wait\n    run: sleep 30\n")
    for value in ("300", "300ms", "1s"):
        env, code = cli.tool("run", "--mode", "tool", "--timeout", value, "exec sleep 30")
        assert (code, env["error"]["message"]) == (1, "lobster runtime timed out"), value
    env, _ = cli.tool("run", "--mode", "tool", "slow.lobster")
    done, code = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"],
                          "--approve", "yes", "--timeout", "300")
    assert (code, done["error"]["message"]) == (1, "lobster runtime timed out")
    human = cli.run("run", "--quiet", "exec sleep 30", "--timeout", "200")
    assert (human.returncode, human.stderr.splitlines()[0]) == \
        (1, "Error: lobster runtime timed out")
    for bad in ("0", "soon", "-5", ""):
        env, code = cli.tool("run", "--mode", "tool", "--timeout", bad, "exec echo hi")
        assert (code, env["error"]["code"]) == (2, "E021"), bad
    env, code = cli.tool("resume", "--id", "abcd1234", "--approve", "yes", "--timeout", "x")
    assert (code, env["error"]["code"]) == (2, "E021")


def test_progress_lines_only_when_asked_for_off_a_terminal(cli):
    """SPEC 9.19: on a pipe human-mode stderr is the original's; `--progress` shows each
    step as one plain line."""
    (cli.work / "w.lobster").write_text(
        "steps:\n  - id: a\n    run: echo one\n  - id: b\n    when: \"false\"\n    run: echo x\n"
        "  - id: c\n    run: echo two\n")
    plain = cli.run("run", "w.lobster")
    assert plain.stderr == ""
    proc = cli.run("run", "--progress", "w.lobster")
    assert proc.stdout == plain.stdout
    lines = [re.sub(r"\d+ ms", "N ms", line) for line in proc.stderr.splitlines()]
    assert lines == [
        "lobster: step a started",
        "lobster: step a finished in N ms (exit 0, 4 bytes out, 0 bytes err)",
        "lobster: step b skipped (condition false)",
        "lobster: step c started",
        "lobster: step c finished in N ms (exit 0, 4 bytes out, 0 bytes err)",
    ]
    assert proc.stdout == '[\n  "two\\n"\n]\n'
    tool = cli.run("run", "--mode", "tool", "--progress", "w.lobster")
    assert tool.stderr == ""  # tool mode: only what --events asks for


def test_on_a_terminal_progress_is_one_line_rewritten_and_cleared(cli):
    (cli.work / "w.lobster").write_text("steps:\n  - id: a\n    run: echo one\n")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([LOBSTER, "run", "w.lobster"], cwd=cli.work, env=cli.env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=follower, timeout=60)
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert proc.stdout == b'[\n  "one\\n"\n]\n'
    text = seen.decode()
    assert "\r\x1b[Klobster: step 1/1 · a started" in text  # with its counts (issue 21)
    assert "\r\x1b[Klobster: step 1/1 · a finished in " in text
    assert text.endswith("\r\x1b[K") and "\n" not in text.replace("\r\n", "")


def _bash(script: str, words: list[str]) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    probe = (f"source {script}\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words) - 1}\n"
             "_lobster\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_sources_and_completes(cli, tmp_path):
    script = tmp_path / "lobster.bash"
    proc = cli.run("completion", "bash")
    assert proc.returncode == 0
    script.write_text(proc.stdout)
    assert _bash(script, ["lobster", "re"]) == ["resume"]
    assert "completion" in _bash(script, ["lobster", ""])
    assert _bash(script, ["lobster", "run", "--mo"]) == ["--mode"]
    assert _bash(script, ["lobster", "run", "--mode", ""]) == ["tool", "human"]
    assert _bash(script, ["lobster", "resume", "--approve", ""]) == ["yes", "no"]
    assert set(_bash(script, ["lobster", "resume", "--"])) >= {"--token", "--id", "--approve",
                                                               "--response-json", "--cancel"}
    assert _bash(script, ["lobster", "completion", ""]) == ["bash", "zsh"]
    registered = subprocess.run(["bash", "--norc", "-c", f"source {script}; complete -p lobster"],
                                capture_output=True, text=True, timeout=60)
    assert registered.stdout.strip() == "complete -o filenames -F _lobster lobster"


def test_zsh_completion_script(cli):
    proc = cli.run("completion", "zsh")
    assert proc.returncode == 0 and proc.stdout.startswith("#compdef lobster\n")
    assert "compadd -- run resume tool" in proc.stdout
    if shutil.which("zsh"):
        checked = subprocess.run(["zsh", "-n"], input=proc.stdout, text=True,
                                 capture_output=True, timeout=60)
        assert checked.returncode == 0, checked.stderr
    bad = cli.run("completion", "fish")
    assert (bad.returncode, bad.stderr) == (
        2, "lobster: error[E024]: completion takes bash or zsh (got 'fish')\n")


def test_refusals_in_the_bad_input_catalogue_hold(cli):
    """Every entry of tests/bad_inputs/cli-polish.json, here too (the catalogue's own runner
    checks them with the others)."""
    from pathlib import Path

    entries = json.loads((Path(__file__).resolve().parents[1] / "bad_inputs" / "cli-polish.json").read_text())
    for entry in entries:
        for name, text in entry.get("files", {}).items():
            (cli.work / name).write_text(text)
        exe = LOBSTER if entry["argv"][0] == "lobster" else LOBSTERC
        proc = cli.run(*entry["argv"][1:], exe=exe, stdin=entry.get("stdin"),
                       env=entry.get("env"))
        expect = entry["expect"]
        assert proc.returncode == expect["exit"], entry["id"]
        if proc.stdout.startswith("{"):
            error = json.loads(proc.stdout)["error"]
        else:
            m = re.search(r"error\[(\w+)\]: (.*)", proc.stderr)
            error = {"code": m.group(1), "message": m.group(2)} if m else {}
        assert (error.get("code"), error.get("message")) == \
            (expect["code"], expect["message"]), entry["id"]
        assert "Traceback" not in proc.stdout + proc.stderr
