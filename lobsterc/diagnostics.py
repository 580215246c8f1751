"""Diagnostics: stable codes, messages, spans; CompileError; the text renderer."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from lobsterc.source import Source, Span
from vm.source import render as render_span

# Stable codes. E1xx syntax, E2xx checks, W3xx lint warnings.
CODES: dict[str, str] = {
    "E101": "empty pipeline",
    "E102": "unclosed quote",
    "E103": "empty command stage",
    "E201": "unknown command",
    "E202": "unknown flag",
    "E203": "missing required argument",
    "E204": "invalid argument value",
    "E210": "invalid workflow file",
    "E211": "unknown step reference",
    "E212": "invalid condition",
    "E213": "invalid JSON Schema",
}


@frozen
class Diagnostic:
    code: str
    message: str  # the user-facing text (reference wording where the reference has one)
    span: Span | None = None
    help: str | None = None  # e.g. "did you mean 'where'?"
    severity: str = "error"  # error | warning
    kind: str = "runtime_error"  # envelope error type: parse_error | runtime_error


class CompileError(Exception):
    """All diagnostics of a failed compile, sorted by position; `str` is the first one."""

    def __init__(self, diagnostics: Iterable[Diagnostic], source: Source | None = None) -> None:
        self.diagnostics = sorted(
            diagnostics, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0)
        )
        self.source = source
        super().__init__(self.diagnostics[0].message if self.diagnostics else "compile error")

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


def render(diag: Diagnostic, source: Source | None = None) -> str:
    """`file:line:col: severity[CODE]: message`, the source line with a caret, and help.
    Without a matching `source`, the file the span names is read, if there is one."""
    return render_span(diag.span, diag.code, diag.message, severity=diag.severity,
                       help=diag.help, source=source)
