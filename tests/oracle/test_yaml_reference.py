"""YAML edge cases through the original and ours: a one-step workflow `run: cat` with the value
under test as its `stdin`, so the envelope's output is the loaded value. Both must agree on
whether the file loads and on the value. Where our one event source (ruamel.yaml, see
lobsterc/load/yaml_text.py) reads YAML 1.2 differently from the original's npm `yaml`,
the case is in DIFFERENT with its reason (docs/differences.md) and the test checks that it
still differs: a fixed one comes off the list. Syntax errors are compared as refusals, not
word for word (the parsers word them differently; docs/differences.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from differential.compare import our_command, reference_command

REF, WHY = reference_command()
pytestmark = pytest.mark.skipif(REF is None, reason=f"needs the original: {WHY}")


def cat(value: str) -> str:
    return f"steps:\n  - id: a\n    run: cat\n    stdin: {value}\n"


AGREE = [
    cat("[yes, no, on, off, ~, 0o17, 0x1f, .inf, 1_000, 1:20, 010, +1, 1e3, .NaN, 'x', True,"
        " NULL, 0b1, -.inf, 1.5e+3, -1.0, 0x, 12e]"),  # the YAML 1.2 core schema
    "\ufeffsteps:\n  - {id: a, run: cat, stdin: x}\n",  # a byte order mark
    "steps:\n  - {id: a, run: cat, stdin: x\u2028y}\n",
    "%YAML 1.2\n---\nsteps:\n  - {id: a, run: cat, stdin: x}\n",
    "&steps:\n  - {id: a, run: cat, stdin: x}\n",  # an anchor named `steps:`: no steps
    "steps:\n  - {id: a, run: cat, stdin: !!str 5}\n",
    "steps:\n  - {id: a, run: cat, stdin: !!int '5'}\n",
    "steps:\n  - {id: a, run: cat, stdin: !custom x}\n",
    "steps:\n  - {id: a, run: cat, stdin: [k: v]}\n",
    "steps:\n  - {id: a, run: cat, stdin: [? k : v]}\n",
    "steps:\n  - {id: a, run: cat, stdin: {? : v}}\n",  # an empty key is ""
    cat("{1: a, true: b, null: c, 1.5: d, ~: e}"),  # keys as the original spells them
    cat("|#x\n      echo"),  # refused by both
    cat("|\n      x\n..."),
    cat("x\n---\nsteps: []"),  # two documents: refused
    cat("{a: 1, a: 2}"),
    cat("[*nope]"),
    cat(">-\n      folded\n      text\n\n      more"),
    cat("'it''s'"),
    cat('"\\x41\\u00e9\\/\\t"'),
    "steps:\n- id: a\n  run: cat\n  stdin: [a, b]\n",
    cat("a: b"),
    "x-data: &s [1, 2]\nsteps:\n  - {id: a, run: cat, stdin: *s}\n",  # an alias
]

DIFFERENT = {  # text -> why ours differs (each in docs/differences.md)
    "steps:\n  - id: a\n    run:\tcat\n    stdin: x\n":
        "ruamel.yaml refuses a tab after `key:`; YAML 1.2 and the original accept it",
    "steps:\n  - {id: a, run: cat, stdin: x\x85y}\n":
        "ruamel.yaml folds NEL (U+0085) as a line break (YAML 1.1); the original keeps it",
    "%YAML 1.1\n---\nsteps:\n  - {id: a, run: cat, stdin: yes}\n":
        "a %YAML 1.1 directive switches the original to YAML 1.1 booleans; ours stays 1.2",
    'steps:\n  - {id: a, run: cat, stdin: ["a":b]}\n':
        "ruamel.yaml refuses a JSON-like key with its value adjacent in a flow sequence",
    cat("|\n  \n      echo"):
        "ruamel.yaml refuses a less indented blank first line in a block scalar",
    cat("{? [a] : 1}"):
        "a complex mapping key: the original spells it as flow YAML, ours refuses it",
}


def outcome(command: list[str], text: str, where: Path) -> tuple:
    path = where / "case.lobster"
    path.write_text(text, encoding="utf-8", newline="")
    proc = subprocess.run([*command, "run", "--mode", "tool", "--file", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=where,
                          stdin=subprocess.DEVNULL, env=dict(os.environ))
    envelope = json.loads(proc.stdout)
    return envelope["ok"], envelope.get("output")


@pytest.mark.parametrize("text", AGREE)
def test_the_original_and_ours_load_the_same(text: str, tmp_path: Path):
    assert outcome(our_command(), text, tmp_path) == outcome(REF, text, tmp_path)


@pytest.mark.parametrize("text", list(DIFFERENT))
def test_a_known_difference_is_still_one(text: str, tmp_path: Path):
    assert outcome(our_command(), text, tmp_path) != outcome(REF, text, tmp_path), DIFFERENT[text]
