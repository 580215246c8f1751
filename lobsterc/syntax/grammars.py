"""The Lark grammars' text. An installed wheel carries them as package data in
`lobsterc/grammar/`; a source checkout keeps them in the repository's top-level `grammar/`."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # lobsterc/
PLACES = (_PACKAGE / "grammar", _PACKAGE.parent / "grammar")


def directory() -> Path:
    """The folder holding `pipeline.lark` and `expr.lark`."""
    for place in PLACES:
        if (place / "pipeline.lark").is_file():
            return place
    raise FileNotFoundError(f"lobsterc: grammar files not found in {' or '.join(map(str, PLACES))}")


def text(name: str) -> str:
    """The text of one grammar file, e.g. `text("pipeline.lark")`."""
    return (directory() / name).read_text(encoding="utf-8")
