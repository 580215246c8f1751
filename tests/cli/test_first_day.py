"""What a new user trips on at the front door (issue 48 items 4 and 6): `python -m`, lobsterc's
help, did-you-mean and completion, one version form, and the small hints of `lobster`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import LOBSTER, LOBSTERC, ROOT, Cli
from pty_run import on_a_terminal
from vm import __version__


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(tmp_path, in_process=True)


def test_python_m_runs_both_commands_and_every_version_has_one_form(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOBSTER_STATE_DIR": str(tmp_path / "s")}
    said = set()
    for argv in ([sys.executable, "-m", "lobsterc", "--version"],
                 [sys.executable, "-m", "vm", "--version"], [LOBSTER, "--version"],
                 [LOBSTERC, "--version"]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, (argv, proc.stderr)
        said.add(proc.stdout)
    assert said == {f"{__version__}\n"}
    ran = subprocess.run([sys.executable, "-m", "vm", "run", "--mode", "tool",
                          "exec --json --shell 'echo [7]'"], capture_output=True, text=True,
                         env=env, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0 and '"output": [\n    7\n  ]' in ran.stdout, ran.stderr
    linted = subprocess.run([sys.executable, "-m", "lobsterc", "lnit"], capture_output=True,
                            text=True, env=env, timeout=60)
    assert linted.returncode == 2 and "did you mean 'lint'?" in linted.stderr


def test_lobsterc_help_names_and_mistyped_commands(cli):
    helped = cli.run("help", "lint", exe=LOBSTERC)
    assert (helped.returncode, helped.stdout) == (0, cli.run("lint", "--help", exe=LOBSTERC).stdout)
    assert "usage: lobsterc lint" in helped.stdout
    overview = cli.run("help", exe=LOBSTERC)
    assert overview.returncode == 0 and "lobsterc help COMMAND" in overview.stdout
    for word, hint in (("lnit", "did you mean 'lint'?"), ("dsi", "did you mean 'dis'?"),
                       ("frobnicate", "`lobsterc --help` lists the commands")):
        proc = cli.run(word, "x.lobster", exe=LOBSTERC)
        assert proc.returncode == 2 and hint in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert "did you mean 'lint'" in cli.run("help", "lnt", exe=LOBSTERC).stderr


@pytest.mark.skipif(not os.path.exists("/bin/bash"), reason="no bash to source the script in")
def test_lobsterc_completion_completes_commands_and_flags_in_bash(cli):
    script = cli.run("completion", "bash", exe=LOBSTERC)
    assert script.returncode == 0
    (cli.work / "c.bash").write_text(script.stdout)
    probe = ('source ./c.bash; COMP_WORDS=(lobsterc li); COMP_CWORD=1; _lobsterc; '
             'echo "${COMPREPLY[@]}"; COMP_WORDS=(lobsterc lint --req); COMP_CWORD=2; '
             '_lobsterc; echo "${COMPREPLY[@]}"')
    proc = subprocess.run(["/bin/bash", "-c", probe], cwd=cli.work, capture_output=True,
                          text=True, timeout=30)
    assert proc.stdout == "lint\n--require-approval\n", proc.stderr
    zsh = cli.run("completion", "zsh", exe=LOBSTERC)
    assert zsh.returncode == 0 and "compdef _lobsterc lobsterc" in zsh.stdout
    assert cli.run("completion", "fish", exe=LOBSTERC).returncode == 2


def test_lobster_suggests_what_was_meant(cli):
    (cli.work / "hello.lobster").write_text("steps:\n  - id: a\n    run: echo hi\n")
    for argv, said in ((["--verison"], "did you mean --version?"),
                       (["run", "hello.lobstr"], "did you mean hello.lobster?"),
                       (["hello.lobstr"], "did you mean hello.lobster?"),
                       (["cancel", "--older-than", "7"], "pending --older-than 7d --cancel")):
        proc = cli.run(*argv)
        assert proc.returncode == 2 and said in proc.stderr, (argv, proc.stderr)
    for flag in ("--id", "--token"):
        envelope, code = cli.tool("resume", flag)
        assert (code, envelope["error"]["message"]) == (2, f"{flag} needs a value")
    # a real pipeline command is never second-guessed
    assert cli.run("json").returncode == 0


def test_lobster_run_alone_prints_its_usage_on_a_terminal_only(tmp_path):
    cli = Cli(tmp_path)
    code, said = on_a_terminal([LOBSTER, "run"], {**cli.env, "TERM": "dumb"}, str(cli.work))
    assert code == 2 and "Parse error: Empty pipeline" in said and "usage: lobster run" in said
    piped = cli.run("run")
    assert (piped.returncode, piped.stderr) == (2, "Parse error: Empty pipeline\n")


def test_lobster_mcp_on_a_terminal_says_it_waits_for_a_client(tmp_path):
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    cli = Cli(tmp_path)

    def end(out: bytes, fd: int, _pid: int) -> bool:
        if b"waiting for an MCP client" in out:
            os.write(fd, b"\x04")  # Ctrl-D: end of input
            return True
        return False

    code, said = on_a_terminal([LOBSTER, "mcp"], {**cli.env, "TERM": "dumb"}, str(cli.work),
                               react=end)
    assert "lobster mcp: waiting for an MCP client on stdin" in said, said
    assert code == 0, said


def test_ctrl_c_clears_the_progress_line_before_it_says_so(tmp_path):
    cli = Cli(tmp_path)

    def interrupt(out: bytes, _fd: int, pid: int) -> bool:
        if b"started" in out:
            os.kill(pid, signal.SIGINT)
            return True
        return False

    code, said = on_a_terminal([LOBSTER, "run", "exec --shell 'sleep 30'"],
                               {**cli.env, "TERM": "dumb"}, str(cli.work), react=interrupt)
    assert code == 128 + signal.SIGINT, said
    assert "\r\x1b[KReceived SIGINT" in said, repr(said)
