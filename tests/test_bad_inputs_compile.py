"""The compile-time refusals of tests/bad_inputs/compile.json, each run as a real process in a
fresh directory: exit code, code and exact message, no traceback, and nothing ran (a file
`ran` that a step would create does not exist)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess

import pytest

from conftest import BIN, ROOT

ENTRIES = json.loads((ROOT / "tests" / "bad_inputs" / "compile.json").read_text())


def test_the_catalogue_has_unique_ids() -> None:
    ids = [e["id"] for e in ENTRIES]
    assert len(ids) == len(set(ids)) and len(ids) >= 30


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_bad_input(entry: dict, tmp_path) -> None:
    for name, text in entry.get("files", {}).items():
        (tmp_path / name).write_text(text)
    for name, data in entry.get("files_b64", {}).items():
        (tmp_path / name).write_bytes(base64.b64decode(data))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(LOBSTER_STATE_DIR=str(tmp_path / ".state"), HOME=str(tmp_path),
               **entry.get("env", {}))
    argv = [str(BIN / entry["argv"][0]), *entry["argv"][1:]]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, input=entry.get("stdin") or "",
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stdout + proc.stderr
    expect = entry["expect"]
    if entry["argv"][0] == "lobster" and "--mode" in entry["argv"]:
        error = json.loads(proc.stdout)["error"]
        found = (error["code"], error["message"])
    else:
        m = re.search(r"(?:error|warning)\[(\w+)\]: (.*)", proc.stdout + proc.stderr)
        found = (m[1], m[2]) if m else (None, None)
    assert (proc.returncode, *found) == (expect["exit"], expect["code"], expect["message"])
    assert not (tmp_path / "ran").exists()
