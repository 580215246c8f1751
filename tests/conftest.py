"""Shared fixtures: the real `lobster` / `lobsterc` executables in a temporary state dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
LOBSTER = str(BIN / "lobster")
LOBSTERC = str(BIN / "lobsterc")
ROOT = Path(__file__).resolve().parent.parent

# Child `lobster` processes keep compiled bytecode in one shared cache even where the
# environment disables writing it (a fresh interpreter compiling every module costs more
# than the test it runs).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX",
                      os.path.join(tempfile.gettempdir(), "lobster-test-pycache"))


class Cli:
    """Runs the real executables with a private state dir and home."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = tmp_path / "state"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
        self.env.update(LOBSTER_STATE_DIR=str(self.state), HOME=str(tmp_path), TZ="UTC")

    def run(self, *argv: str, exe: str = LOBSTER, stdin: str | None = None,
            env: dict | None = None, check_json: bool = False):
        proc = subprocess.run([exe, *argv], cwd=self.work, env={**self.env, **(env or {})},
                              input=stdin, capture_output=True, text=True, timeout=60,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        return proc

    def tool(self, *argv: str, **kw) -> tuple[dict, int]:
        proc = self.run(*argv, **kw)
        try:
            return json.loads(proc.stdout), proc.returncode
        except ValueError:
            raise AssertionError(f"not JSON: {proc.stdout!r} stderr={proc.stderr!r}") from None

    def pipeline(self, text: str, **kw) -> tuple[dict, int]:
        return self.tool("run", "--mode", "tool", text, **kw)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden/*.lbs from the current compiler (tests/compiler/test_golden.py)")


def imported_by_lobster(cli, *argv: str) -> tuple[str, set[str]]:
    """The real `lobster` script's stdout, and every module it imported (-X importtime)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", LOBSTER, *argv], cwd=cli.work,
                          env=cli.env, capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:")}
    return proc.stdout, modules
