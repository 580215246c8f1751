"""Every shell example of the README and docs/ is run and its output compared (the syntax of
expected output, placeholders and `no-run` fences is in tests/docs/shelldoc.py). `lobster` and
`lobsterc` commands run in this process (run_in_process), others through /bin/sh."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_in_process
from docs.shelldoc import Command, Fence, Session, documents, environment, fences, pattern

DOCUMENTS = documents(ROOT)


def _in_process(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[int, str]:
    proc = run_in_process(argv, cwd=cwd, env=env)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def session(tmp_path: Path) -> Session:
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    (tmp_path / "home").mkdir()
    env = environment(dict(os.environ), tmp_path / "home", tmp_path / "state",
                      str(Path(sys.executable).parent))
    return Session(str(work), env, _in_process)


def _files(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file()}


def _ignored(relative: str) -> bool:
    """Whether the checkout's .gitignore lists `relative` (a path from its root)."""
    proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", relative], cwd=ROOT,
                          capture_output=True, text=True)
    return proc.returncode == 0


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_example_prints_what_it_says(path: Path, session: Session):
    failures = []
    top = Path(session.cwd)
    before = _files(top)
    told = set()  # the files a document tells the reader to create (`file=NAME` fences)
    for fence in fences(path.read_text(encoding="utf-8")):
        if fence.file:
            session.write(fence.file, fence.body)
            told.add(str((Path(session.cwd) / fence.file).resolve().relative_to(top)))
        if not fence.runs:
            continue
        for command in fence.commands:
            # a file the reader makes with `> NAME` is theirs, as a `file=NAME` fence is
            told.update(str((Path(session.cwd) / name).resolve().relative_to(top))
                        for name in re.findall(r"(?<![0-9&])>\s*([\w./-]+)", command.text))
            problem = session.run(command)
            if problem:
                failures.append(f"{path.name}:{command.line}: $ {command.text}\n{problem}")
                break  # the commands after it depend on it
        if failures:
            break
    assert failures == []
    # what the examples wrote beside the reader's files is left out of git, never left
    # untracked in a checkout
    left = sorted(f for f in _files(top) - before - told if not _ignored(f))
    assert left == [], f"{path.name}'s examples leave files .gitignore does not list: {left}"


def test_the_docs_have_shell_examples_and_only_a_few_are_not_run():
    found = [f for path in DOCUMENTS for f in fences(path.read_text(encoding="utf-8"))
             if f.info.split()[:1] == ["sh"]]
    commands = sum(len(f.commands) for f in found if f.runs)
    shown_only = sum(len(f.commands) for f in found if not f.runs)
    assert commands >= 20 and shown_only <= commands // 2, (commands, shown_only)


def test_a_wrong_output_a_wrong_exit_code_and_a_placeholder_are_seen(tmp_path: Path):
    outputs = {"one": (0, "id: 1a2b\nlater\n"), "two": (3, "got 1a2b\n")}
    session = Session(str(tmp_path), {}, lambda argv, cwd, env: outputs[argv[1]])
    assert session.run(Command(1, "lobster one", ["id: <id>", "..."])) is None
    assert session.bound == {"id": "1a2b"}
    assert session.run(Command(2, "lobster two", ["got <id>"], exit_code=3)) is None
    assert "exited 3, not 0" in session.run(Command(3, "lobster two", ["got <id>"]))
    assert "output differs" in session.run(Command(4, "lobster two", ["got 9z"], exit_code=3))


def test_wildcards_match_lines_and_text_but_not_a_missing_line():
    assert pattern(["a", "...", "z"], {}).fullmatch("a\nb\nc\nz\n")
    assert pattern(["a ... z"], {}).fullmatch("a b c z\n")
    assert pattern(["<pipeline>:1:2"], {}).fullmatch("<pipeline>:1:2\n")
    assert not pattern(["<pipeline>:1:2"], {}).fullmatch("x:1:2\n")
    assert not pattern(["a", "z"], {}).fullmatch("a\nb\nz\n")


def test_fences_are_read_with_their_commands_exit_codes_and_files():
    text = ("```sh\n$ lobster a \\\n  --b\nout\n[exit 2]\n$ lobster c\n```\n"
            "```yaml file=x.lobster\nsteps: []\n```\n```sh no-run\n$ pip install x\n```\n")
    first, second, third = fences(text)
    assert [(c.line, c.text, c.expected, c.exit_code) for c in first.commands] == [
        (2, "lobster a --b", ["out"], 2), (6, "lobster c", [], 0)]
    assert first.runs and second.file == "x.lobster" and not third.runs
    assert isinstance(first, Fence)
