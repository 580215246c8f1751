"""docs/differences.md keeps SPEC section 9's numbering (items 1 to 20, in order, none
missing), and every allow-list entry of the differential tester names an item that exists."""

from __future__ import annotations

import re

from conftest import ROOT
from differential.allowlist import ENTRIES

PAGE = (ROOT / "docs" / "differences.md").read_text(encoding="utf-8")
SPEC_ITEMS = 20  # SPEC section 9's list, the last one (9.20) the command-line check


def numbered_items(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^(\d+)\. \*\*", text, re.MULTILINE)]


def test_the_numbered_list_is_spec_section_9_in_order():
    assert numbered_items(PAGE) == list(range(1, SPEC_ITEMS + 1))


def test_every_allow_list_entry_names_an_item_of_the_page():
    for entry in ENTRIES:
        for number in re.findall(r"§9\.(\d+)", entry.spec):
            assert 1 <= int(number) <= SPEC_ITEMS, (entry.id, entry.spec)
        named = re.search(r"docs/differences\.md (\d+)", entry.spec)
        assert named is None or f"§9.{named.group(1)}" in entry.spec, (entry.id, entry.spec)


def test_a_gap_in_the_numbering_is_seen():
    assert numbered_items("1. **a**\n3. **c**\n") == [1, 3] != list(range(1, 3))
