"""A long-lived `node` child that answers each line it is given with one line: the oracle the
property tests hold our JavaScript semantics to (JSON.parse's messages, Date.parse), one
process for thousands of questions instead of a start-up each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest


class NodeLines:
    """`node -e SCRIPT` with `env` over ours; `ask(text)` writes `text` as a JSON string line
    (ASCII: a lone surrogate as \\udXXX) and returns the line the script answers."""

    def __init__(self, script: str, **env: str) -> None:
        if shutil.which("node") is None:
            pytest.skip("node is not on PATH: no JavaScript engine to compare with")
        self.proc = subprocess.Popen(["node", "-e", script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                     env={**os.environ, **env})

    def readline(self) -> str:
        return self.proc.stdout.readline().rstrip("\n")

    def ask(self, text: str) -> str:
        self.proc.stdin.write(json.dumps(text) + "\n")
        self.proc.stdin.flush()
        return self.readline()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
