"""The one rule for a working directory a caller chooses (a request's `cwd`, a step `cwd`
that takes an `${arg}`): relative, and inside its base once symbolic links are resolved."""

from __future__ import annotations

import os
from typing import Any


class WorkdirRefused(ValueError):
    """A chosen working directory breaks the rule; `str` is the one-line reason."""


def contained_cwd(cwd: Any, base: str) -> str:
    """`cwd` joined to `base`, resolved, when it stays inside `base`; else WorkdirRefused."""
    if not isinstance(cwd, str) or os.path.isabs(cwd):
        raise WorkdirRefused("cwd must be a relative path")
    if "\0" in cwd:
        raise WorkdirRefused("cwd must not contain a NUL byte")
    root = os.path.realpath(base)
    target = os.path.realpath(os.path.join(root, cwd))
    if target != root and not target.startswith(root + os.sep):
        raise WorkdirRefused("cwd must stay within the gateway working directory")
    return target
