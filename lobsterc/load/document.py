"""A positioned document: the plain data of a workflow file and the span of every value and key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from attrs import field, frozen

from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.syntax.source import Source, Span

Path = tuple  # keys and indices from the document root, e.g. ("steps", 2, "run")


@frozen
class Document:
    """A parsed workflow file: plain data, plus where every value (and mapping key) came from."""

    path: str
    source: Source
    data: Any = field(eq=False)
    spans: Mapping[Path, Span] = field(eq=False, repr=False)
    key_spans: Mapping[Path, Span] = field(factory=dict, eq=False, repr=False)

    def span_of(self, *path: Any) -> Span:
        """The span of the value at `path`, else of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            span = self.spans.get(tuple(path[:end]))
            if span is not None:
                return span
        return self.source.span(0, len(self.source.text))

    def key_span_of(self, *path: Any) -> Span:
        """The span of the mapping key that names `path`, else span_of(path)."""
        return self.key_spans.get(tuple(path)) or self.span_of(*path)


class OffsetSpans(Mapping):
    """Path -> Span, kept as (start, end) offsets and turned into a Span only when asked for:
    a file that compiles asks for a handful of the hundreds of spans its loader records."""

    __slots__ = ("source", "offsets")

    def __init__(self, source: Source, offsets: dict[Path, tuple[int, int]]) -> None:
        self.source = source
        self.offsets = offsets

    def __getitem__(self, path: Path) -> Span:
        start, end = self.offsets[path]
        return self.source.span(start, end)

    def get(self, path: Path, default: Any = None) -> Any:
        offsets = self.offsets.get(path)
        return default if offsets is None else self.source.span(*offsets)

    def __contains__(self, path: object) -> bool:
        return path in self.offsets

    def __iter__(self) -> Iterator[Path]:
        return iter(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets)


# Limits on a workflow file (README "Limits"), each refused with E230 before the text is
# expanded any further: a small file cannot make the loader build a huge value.
MAX_WORKFLOW_BYTES = 1024 * 1024  # the file's size
MAX_DOCUMENT_NODES = 100_000  # values in the loaded document, every alias expansion counted
MAX_NESTING = 64  # mappings and sequences inside each other


class ParseError(Exception):
    """A syntax error at a character offset; the loader words it with line and column."""

    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what)
        self.what = what
        self.offset = offset


class OverLimit(ParseError):
    """The text is over one of the limits above (E230)."""


def syntax_error(source: Source, what: str, offset: int) -> CompileError:
    line, col = source.position(offset)
    span = source.span(offset, offset + 1)
    message = f"Workflow file parse error: {what} at line {line}, column {col}"
    return CompileError([Diagnostic(code="E210", message=message, span=span)], source)


def load_error(source: Source, exc: ParseError) -> CompileError:
    """The CompileError of a ParseError: a syntax error (E210), or a limit (E230)."""
    if not isinstance(exc, OverLimit):
        return syntax_error(source, exc.what, exc.offset)
    line, col = source.position(exc.offset)
    message = f"Workflow file over a limit: {exc.what} at line {line}, column {col}"
    span = source.span(exc.offset, exc.offset + 1)
    return CompileError([Diagnostic(code="E230", message=message, span=span)], source)


def too_deep(offset: int) -> OverLimit:
    return OverLimit(f"nested deeper than {MAX_NESTING} levels", offset)

