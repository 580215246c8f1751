"""The test markers: pyproject declares them and deselects the slow and browser ones by
default, docs/testing.md says what each covers, and CI (.ci/run) runs every test."""

from __future__ import annotations

import re
import shlex
import tomllib

from conftest import ROOT

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def declared() -> dict[str, str]:
    return dict(line.split(":", 1) for line in CONFIG["markers"])


def test_the_default_run_leaves_out_exactly_the_declared_slow_and_browser_markers():
    words = shlex.split(CONFIG["addopts"])
    assert "--strict-markers" in words
    expression = words[words.index("-m") + 1]
    assert set(re.findall(r"not (\w+)", expression)) == {"slow", "browser"} <= set(declared())


def test_docs_testing_has_a_row_for_every_marker():
    text = (ROOT / "docs" / "testing.md").read_text()
    rows = set(re.findall(r"^\| `(\w+)` \|", text, re.M))
    assert rows == set(declared())


def test_ci_runs_every_test():
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.startswith("python -m pytest")]
    assert 'python -m pytest -m ""' in commands
