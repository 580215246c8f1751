"""A step result's fields have one table (lobsterc.check.checker.RESULT_FIELDS): E218's help
and docs/workflows.md's generated table read it, and it names exactly the fields the VM
writes into a result (vm/engine: steps, gates, machine, run, control); docs/workflows.md's
example reads each of them in a run (test_examples.py)."""

from __future__ import annotations

import re

from conftest import ROOT
from lobsterc.check.checker import RESULT_FIELDS

ENGINE = ROOT / "vm" / "engine"


def written_by_the_vm() -> set[str]:
    found: set[str] = set()
    for path in ENGINE.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        found.update(re.findall(r'\bresult\["(\w+)"\]\s*=', text))
        for literal in re.findall(r'results\[[^\]]+\]\s*=\s*\{([^}]*)\}', text):
            found.update(re.findall(r'"(\w+)":', literal))
        for literal in re.findall(r'\bresult: dict\[str, Any\] = \{([^}]*)\}', text):
            found.update(re.findall(r'"(\w+)":', literal))
    return found


def test_the_table_names_exactly_the_fields_the_vm_writes():
    assert written_by_the_vm() == set(RESULT_FIELDS)


def test_every_field_is_documented_and_read_by_the_example():
    page = (ROOT / "docs" / "workflows.md").read_text(encoding="utf-8")
    table = page[page.index("<!-- generated: table step-results -->"):]
    example = page[page.index("```yaml file=results.lobster"):]
    for name in RESULT_FIELDS:
        assert f"| `{name}` |" in table, name
        assert name == "id" or re.search(rf"\$\w+(\.\w+)*\.{name}\b", example), name
