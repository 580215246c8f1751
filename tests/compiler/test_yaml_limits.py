"""YAML aliases cannot grow a small file into a huge document: the characters of every scalar
and key are counted with each alias expanded (lobsterc.load.yaml_text.MAX_EXPANDED_CHARS), and
a file over that is refused with E230 before the copies are made."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import LOBSTER
from lobsterc.diagnostics import CompileError
from lobsterc.load import parse_text
from lobsterc.load.document import MAX_DOCUMENT_NODES, MAX_WORKFLOW_BYTES
from lobsterc.load.yaml_text import MAX_EXPANDED_CHARS


def aliased(chars: int, times: int) -> str:
    """A workflow whose one step's stdin aliases a `chars`-long anchored string `times` times."""
    return (f"x-big: &b {'x' * chars}\nsteps:\n  - id: a\n    run: cat\n    stdin:\n"
            + "      - *b\n" * times)


def test_a_megabyte_string_aliased_2000_times_is_refused_at_once(tmp_path):
    text = aliased(MAX_WORKFLOW_BYTES - 40_000, 2000)  # within the file and value limits
    assert len(text.encode()) < MAX_WORKFLOW_BYTES and 2000 < MAX_DOCUMENT_NODES
    path = tmp_path / "bomb.lobster"
    path.write_text(text)
    proc = subprocess.run([LOBSTER, "run", "--mode", "tool", "--file", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "E230", proc.stdout
    assert error["message"] == (f"Workflow file over a limit: more than {MAX_EXPANDED_CHARS} "
                                "characters of values (aliases expanded) at line 9, column 9")


def test_the_limit_counts_keys_and_nested_aliases():
    # a 1 000-character key aliased 10 x 10 x 10 x 5 times: 5 million characters of keys in
    # about 10 000 values (the value limit alone lets it through)
    ten = lambda name: "[" + ", ".join([f"*{name}"] * 10) + "]"  # noqa: E731
    text = (f"x-a: &a {{{'k' * 1000}: 1}}\nx-b: &b {ten('a')}\nx-c: &c {ten('b')}\n"
            f"x-e: &e {ten('c')}\nx-d: [*e, *e, *e, *e, *e]\nsteps: [{{id: a, run: x}}]\n")
    with pytest.raises(CompileError) as caught:
        parse_text(text, "wf.lobster")
    assert caught.value.first.code == "E230"
    assert caught.value.first.message.startswith(
        f"Workflow file over a limit: more than {MAX_EXPANDED_CHARS} characters of values")
    assert parse_text(text.replace("*e, *e, *e, *e, *e", "*e, *e, *e"), "wf.lobster")


def test_aliases_within_the_limit_load():
    doc = parse_text(aliased(1000, 100), "wf.lobster")
    assert doc.data["steps"][0]["stdin"] == ["x" * 1000] * 100
