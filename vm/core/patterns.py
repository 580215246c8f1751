"""`compiled(pattern)`: a regular expression compiled when it is first used, not at import.

A cold `lobster` start imports about twenty modules that each compile a pattern or two at
module level, most of which a given run never uses (2.3 ms of a cached run's start, measured).
The object stands in for the `re.Pattern`: its first attribute access compiles the pattern and
keeps the pattern's methods on the instance, so later calls cost what a compiled pattern's do.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["compiled"]


class compiled:  # noqa: N801 - reads as the function it stands for: compiled(r"...")
    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends probe for dunders: not a pattern's
            raise AttributeError(name)
        pattern = re.compile(*self._source)
        for method in ("match", "fullmatch", "search", "sub", "subn", "split", "findall",
                       "finditer", "pattern", "flags", "groups", "groupindex"):
            setattr(self, method, getattr(pattern, method))
        return getattr(pattern, name)

    def __repr__(self) -> str:
        return f"compiled({self._source[0]!r})"
