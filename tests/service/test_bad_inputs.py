"""The bad-input catalogue: every entry of tests/bad_inputs/*.json and every case of
tests/cases/*.lobster runs its `lobster` or `lobsterc` command line, and must be refused with
its exact exit code, error code and message, and no traceback anywhere. The formats are
described in tests/bad_inputs/README.md and tests/cases/README.md.

The entries whose subject is the command line (cli*.json) run as real processes, a few at a
time across the xdist workers (conftest.SharedBatch); the others run the executables' main
functions in this process (conftest.run_in_process), each in its own test; the first two of each
of those files run as real processes too and must be refused alike (test_alike). Each entry has
its own temp dir, state dir and home.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import LOBSTER, LOBSTERC, SharedBatch, run_in_process, session_dir

CATALOGUE = Path(__file__).resolve().parents[1] / "bad_inputs"
ENTRY_KEYS = {"id", "why", "argv", "stdin", "files", "files_b64", "env", "setup", "expect"}
EXPECT_KEYS = {"exit", "code", "message"}
SETUP_KEYS = {"argv", "stdin", "env"}
EXECUTABLES = {"lobster": LOBSTER, "lobsterc": LOBSTERC}
_REPEAT = re.compile(r"<<(\d+)\*(.*?)>>", re.S)
_HUMAN_ERROR = re.compile(r"(?:error|warning)\[([A-Z]\d{3})\]: (.*)")  # lint prints warnings


CASES = CATALOGUE.parent / "cases"
_CHUNK = "# ----\n"
_HEAD = re.compile(r"# (case|why|run|file|expect): (.*)")


def load_cases(path: Path) -> list[dict]:
    """The catalogue entries of a case file (tests/cases/README.md): chunks split by `# ----`
    lines after the file's own opening comment, each its header lines, then the body of the
    one file it writes (`w.lobster` unless `# file:` names another) to the end of the chunk."""
    entries = []
    for chunk in path.read_text(encoding="utf-8").split(_CHUNK)[1:]:
        lines = chunk.split("\n")
        head: dict[str, str] = {}
        while lines and (match := _HEAD.fullmatch(lines[0])):
            head[match.group(1)] = match.group(2)
            lines.pop(0)
        where = f"{path.name}: {head.get('case')}"
        assert {"case", "why", "run", "expect"} <= set(head), f"{where}: a header is missing"
        expect = re.fullmatch(r"exit (\d+) (\S+) (.*)", head["expect"])
        assert expect, f"{where}: `# expect: exit N CODE-or-- message`"
        entries.append({"id": head["case"], "why": head["why"], "argv": shlex.split(head["run"]),
                        "files": {head.get("file", "w.lobster"): "\n".join(lines)},
                        "expect": {"exit": int(expect.group(1)),
                                   "code": None if expect.group(2) == "-" else expect.group(2),
                                   "message": expect.group(3)}})
    return entries


def _load() -> list[tuple[str, dict]]:
    entries = []
    for path in sorted(CATALOGUE.glob("*.json")):
        for entry in json.loads(path.read_text(encoding="utf-8")):
            entries.append((path.name, entry))
    for path in sorted(CASES.glob("*.lobster")):
        entries += [(f"cases/{path.name}", entry) for entry in load_cases(path)]
    return entries


ENTRIES = _load()
# The command line is these files' subject: their entries always run as real processes.
PROCESS_FILES = {"cli.json", "cli-polish.json"}
IN_PROCESS = {entry["id"] for name, entry in ENTRIES if name not in PROCESS_FILES}
# ... and the first two entries of every other file run as processes as well (test_alike)
SAMPLE = [entry for name in sorted({n for n, _ in ENTRIES} - PROCESS_FILES)
          for entry in [e for n, e in ENTRIES if n == name][:2]]
_BASE_ENV = dict(os.environ)  # read once: an in-process run replaces os.environ meanwhile


def expand(text: str | None, found: dict[str, str] | None = None) -> str | None:
    """`<<N*TEXT>>` is TEXT repeated N times; `{{token}}` / `{{approvalId}}` are the values the
    setup commands' last envelope carried."""
    if text is None:
        return None
    text = _REPEAT.sub(lambda m: m.group(2) * int(m.group(1)), text)
    for name, value in (found or {}).items():
        text = text.replace("{{" + name + "}}", value)
    return text


def _env(home: Path, extra: dict | None) -> dict:
    env = {k: v for k, v in _BASE_ENV.items() if not k.startswith("LOBSTER_")}
    env.update(LOBSTER_STATE_DIR=str(home / "state"), HOME=str(home), TZ="UTC")
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = expand(value)
    return env


def _spawn(argv: list[str], cwd: Path, env: dict, stdin: str | None,
           found: dict[str, str], process: bool) -> subprocess.CompletedProcess:
    words = [expand(word, found) for word in argv]
    if not process:
        return run_in_process(words, cwd=cwd, env=env, stdin=expand(stdin, found))
    return subprocess.run([EXECUTABLES[words[0]], *words[1:]], cwd=cwd, env=env,
                          input=expand(stdin, found), capture_output=True, text=True,
                          errors="replace", timeout=120,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def _halt_values(stdout: str) -> dict[str, str]:
    try:
        envelope = json.loads(stdout)
    except ValueError:
        return {}
    found = {}
    for key in ("requiresApproval", "requiresInput"):
        request = envelope.get(key) if isinstance(envelope, dict) else None
        if isinstance(request, dict):
            for name in ("resumeToken", "approvalId"):
                if isinstance(request.get(name), str):
                    found["token" if name == "resumeToken" else name] = request[name]
    return found


def run_entry(entry: dict, process: bool = True) -> dict:
    """Run one entry in a fresh temp dir, as processes or in this process; returns what it
    printed and how it exited."""
    with tempfile.TemporaryDirectory(prefix="lobster-bad-") as tmp:
        home = Path(tmp)
        work = home / "work"
        work.mkdir()
        for name, text in (entry.get("files") or {}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(expand(text), encoding="utf-8")
        for name, data in (entry.get("files_b64") or {}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(base64.b64decode(data))
            (work / name).chmod(0o600)  # private, as the store writes its own (a key must be)
        env = _env(home, entry.get("env"))
        found: dict[str, str] = {}
        setups = []
        for step in entry.get("setup") or []:
            proc = _spawn(step["argv"], work, _env(home, {**(entry.get("env") or {}),
                                                          **(step.get("env") or {})}),
                          step.get("stdin"), found, process)
            setups.append(proc.stdout + proc.stderr)
            found.update(_halt_values(proc.stdout))
        proc = _spawn(entry["argv"], work, env, entry.get("stdin"), found, process)
        return {"exit": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                "setup": setups, "ran": (work / "ran").exists(),
                "workdir": os.path.realpath(work)}


def reported(result: dict) -> tuple[str | None, str | None]:
    """The code and message a refusal reported: the envelope's `error` when stdout is one, else
    the first `error[CODE]: message` line on stderr, else (no code) its first line."""
    try:
        envelope = json.loads(result["stdout"])
    except ValueError:
        envelope = None
    if isinstance(envelope, dict) and isinstance(envelope.get("error"), dict):
        return envelope["error"].get("code"), envelope["error"].get("message")
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    for line in lines + result["stdout"].splitlines():  # (`lobsterc lint` reports on stdout)
        match = _HUMAN_ERROR.search(line)
        if match:
            return match.group(1), match.group(2)
    return None, lines[0] if lines else None


@pytest.fixture(scope="session")
def processes(request, tmp_path_factory, pytestconfig):
    """The selected entries that run as real processes, a few at a time across the workers
    (they are mostly waiting on start-up); the in-process ones run in their own test."""
    wanted = {(item.originalname, item.callspec.params["entry"]["id"])
              for item in request.session.items
              if item.path == Path(__file__) and hasattr(item, "callspec")}
    jobs = [(entry["id"], lambda entry=entry: run_entry(entry)) for _, entry in ENTRIES
            if ("test_refused", entry["id"]) in wanted and entry["id"] not in IN_PROCESS
            or ("test_alike", entry["id"]) in wanted]
    batch = SharedBatch(session_dir(tmp_path_factory, pytestconfig, "bad-inputs"), jobs,
                        threads=max(2, 2 * (os.cpu_count() or 1)))
    yield batch
    batch.finish()


def check(entry: dict, result: dict) -> None:
    shown = (f"exit {result['exit']}\nstdout: {result['stdout'][:2000]}\n"
             f"stderr: {result['stderr'][:2000]}")
    for text in [result["stdout"], result["stderr"], *result["setup"]]:
        assert "Traceback" not in text, shown
    assert not result["ran"], f"a step ran before the refusal (it made `ran`)\n{shown}"
    expect = entry["expect"]
    code, message = reported(result)
    wanted = expand(expect["message"], {"workdir": result["workdir"]})  # files are named absolute
    assert (result["exit"], code, message) == (expect["exit"], expect["code"], wanted), shown


@pytest.mark.parametrize("entry", [e for _, e in ENTRIES], ids=[e["id"] for _, e in ENTRIES])
def test_refused(entry: dict, processes) -> None:
    in_process = entry["id"] in IN_PROCESS
    check(entry, run_entry(entry, process=False) if in_process else processes.result(entry["id"]))


@pytest.mark.parametrize("entry", SAMPLE, ids=[e["id"] for e in SAMPLE])
def test_alike(entry: dict, processes) -> None:
    """An entry that runs in-process is refused the same way by the real executable."""
    check(entry, processes.result(entry["id"]))


def test_catalogue_is_well_formed() -> None:
    seen: set[str] = set()
    for name, entry in ENTRIES:
        where = f"{name}: {entry.get('id')}"
        assert set(entry) <= ENTRY_KEYS, where
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry["id"]), where
        assert entry["id"] not in seen, f"{where}: duplicate id"
        seen.add(entry["id"])
        assert isinstance(entry.get("why"), str) and entry["why"], where
        assert entry["argv"] and entry["argv"][0] in EXECUTABLES, where
        assert set(entry["expect"]) == EXPECT_KEYS, where
        assert isinstance(entry["expect"]["exit"], int) and entry["expect"]["exit"] != 0, where
        for step in entry.get("setup") or []:
            assert set(step) <= SETUP_KEYS and step["argv"][0] in EXECUTABLES, where
