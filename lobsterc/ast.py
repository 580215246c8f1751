"""Syntax tree of pipelines: frozen attrs nodes, each with the Span it came from."""

from __future__ import annotations

from attrs import frozen

from lobsterc.source import Span


@frozen
class Word:
    """One token of a stage after quote removal. `quoted` is true if any part was quoted."""

    text: str
    quoted: bool
    span: Span


@frozen
class Stage:
    """`name word*` between two pipes."""

    name: Word
    words: tuple[Word, ...]
    span: Span


@frozen
class Pipeline:
    stages: tuple[Stage, ...]
    span: Span
