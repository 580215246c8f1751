"""Diagnostics: a stable code (vm.core.codes owns every code, its title and envelope type), a
message, a span; CompileError; the text renderer."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from lobsterc.syntax.source import Source, Span
from vm.core.codes import envelope_type
from vm.core.source import render as render_span

@frozen
class Diagnostic:
    code: str
    message: str  # the user-facing text (reference wording where the reference has one)
    span: Span | None = None
    help: str | None = None  # e.g. "did you mean 'where'?"
    severity: str = "error"  # error | warning
    # (line, column) where a run meets this problem, when that is not where it is written: a
    # step's condition, then its input, are met at the step's start, before its other fields
    order: tuple[int, int] | None = None

    @property
    def kind(self) -> str:
        """The envelope error type the code travels in (vm.core.codes): parse_error, runtime_error."""
        return envelope_type(self.code)


class CompileError(Exception):
    """All diagnostics of a failed compile, in the order a run meets them (by position, or
    `order`); `str` is the first one, the one the original would stop at."""

    def __init__(self, diagnostics: Iterable[Diagnostic], source: Source | None = None) -> None:
        self.diagnostics = sorted(diagnostics, key=met_at)
        self.source = source
        super().__init__(self.diagnostics[0].message if self.diagnostics else "compile error")

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


def met_at(d: Diagnostic) -> tuple[int, int]:
    """Where a run meets `d`: its `order`, else where it is written."""
    if d.order is not None:
        return d.order
    return (d.span.line, d.span.col) if d.span else (0, 0)


def render(diag: Diagnostic, source: Source | None = None) -> str:
    """`file:line:col: severity[CODE]: message`, the source line with a caret, and help.
    Without a matching `source`, the file the span names is read, if there is one."""
    return render_span(diag.span, diag.code, diag.message, severity=diag.severity,
                       help=diag.help, source=source)
