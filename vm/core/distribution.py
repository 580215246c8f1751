"""The distribution's name on the package index, and the one way a message names an extra to
install (vm re-exports both; a module below the facade imports them from here)."""

DISTRIBUTION = "lobster-pipelines"  # pyproject's `name`; `lobster` on the index is another project


def install_hint(extra: str) -> str:
    """How to install an optional extra of this distribution: every hint says it this way."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (from a checkout: pip install '.[{extra}]')"
