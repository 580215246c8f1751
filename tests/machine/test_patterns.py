"""vm.core.patterns: a lazily compiled pattern answers as the compiled one does."""

from __future__ import annotations

import re

import pytest

from vm.core.patterns import compiled


def test_it_compiles_on_first_use_and_answers_as_re_does():
    lazy = compiled(r"(\d+)(ms|s)", re.I)
    assert "match" not in vars(lazy)  # nothing compiled yet
    eager = re.compile(r"(\d+)(ms|s)", re.I)
    for text in ("10ms", "3S", "x", "5s 6ms"):
        assert bool(lazy.fullmatch(text)) == bool(eager.fullmatch(text))
        assert lazy.findall(text) == eager.findall(text)
        assert lazy.sub("#", text) == eager.sub("#", text)
    assert "match" in vars(lazy) and lazy.pattern == eager.pattern and lazy.groups == 2


def test_a_bad_pattern_fails_where_it_is_used():
    lazy = compiled("(")
    with pytest.raises(re.error):
        lazy.match("x")


def test_dunder_probes_are_not_patterns():
    with pytest.raises(AttributeError):
        compiled("a").__deepcopy__
