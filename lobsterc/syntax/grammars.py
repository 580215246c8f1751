"""The Lark grammars' text. An installed wheel carries them as package data in
`lobsterc/grammar/`; a source checkout keeps them in the repository's top-level `grammar/`.
Plain os.path: a cached run reads the folder (the compile cache's fingerprint) and pathlib would
be its only reason to load pathlib and urllib."""

from __future__ import annotations

import os

_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # lobsterc/
PLACES = (os.path.join(_PACKAGE, "grammar"), os.path.join(os.path.dirname(_PACKAGE), "grammar"))


def directory() -> str:
    """The folder holding `pipeline.lark` and `expr.lark`."""
    for place in PLACES:
        if os.path.isfile(os.path.join(place, "pipeline.lark")):
            return place
    raise FileNotFoundError(f"lobsterc: grammar files not found in {' or '.join(PLACES)}")


def text(name: str) -> str:
    """The text of one grammar file, e.g. `text("pipeline.lark")`."""
    with open(os.path.join(directory(), name), encoding="utf-8") as file:
        return file.read()
