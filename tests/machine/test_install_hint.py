"""Every install hint names this project's distribution (pyproject's `name`), never
`lobster` (an unrelated project on the package index), and is written by one function."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from vm import DISTRIBUTION, install_hint

ROOT = Path(__file__).resolve().parents[2]


def test_the_distribution_name_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert DISTRIBUTION == project["name"]
    assert "mcp" in project["optional-dependencies"]


def test_the_hint_names_the_distribution_and_the_checkout_form():
    assert install_hint("mcp") == ("pip install 'lobster-pipelines[mcp]' "
                                   "(from a checkout: pip install '.[mcp]')")


def test_no_module_writes_a_pip_install_hint_of_its_own():
    written = [f"{path.relative_to(ROOT)}:{n}"
               for folder in ("vm", "lobsterc") for path in (ROOT / folder).rglob("*.py")
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"pip install '", line) and path != ROOT / "vm" / "core" / "distribution.py"]
    assert written == []


def test_the_mcp_and_lsp_messages_carry_the_hint():
    from lobsterc.tools.lsp import INSTALL_HINT
    from vm.cli.mcp import MISSING, USAGE

    for text in (MISSING, USAGE, INSTALL_HINT):
        assert "lobster-pipelines[" in text and "'lobster[" not in text
