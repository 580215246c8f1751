"""Sources and spans (offsets to 1-based line/column), the one form in which a location names
its file, and the one printer of errors with a source excerpt: compile errors (lobsterc) and
runtime traps (the machine's Failed) alike."""

from __future__ import annotations

import os
import re

from attrs import field

from vm.core.records import built_on_first_use, frozen

# Span and Source are built on first use, not at import: a cached run, a halt and a resume name
# files (file_name, located) but make neither, and attrs writes and compiles each class as it
# is built (with bisect's import, about 0.7 ms of every cold `lobster` process). Reading one
# (`source.Span`, `from vm.core.source import Source`) builds both, once.
_RECORDS = ("Span", "Source")


def _records() -> tuple[type, type]:
    import bisect

    newline = re.compile("\n")

    @frozen
    class Span:
        """A region of one source: 1-based lines and columns, end exclusive."""

        source: str
        line: int
        col: int
        end_line: int
        end_col: int

        def __str__(self) -> str:
            return f"{self.source}:{self.line}:{self.col}"

    @frozen
    class Source:
        """A named text. `name` is what diagnostics print (a path, or `<pipeline>`)."""

        name: str
        text: str
        _starts: tuple[int, ...] | None = field(init=False, default=None, repr=False, eq=False)

        @property
        def line_starts(self) -> tuple[int, ...]:
            """The offset at which each line begins; worked out when first asked for."""
            starts = self._starts
            if starts is None:
                starts = (0, *(match.end() for match in newline.finditer(self.text)))
                object.__setattr__(self, "_starts", starts)
            return starts

        def position(self, offset: int) -> tuple[int, int]:
            """0-based offset -> (line, col), both 1-based."""
            offset = max(0, min(offset, len(self.text)))
            starts = self.line_starts
            line = bisect.bisect_right(starts, offset) - 1
            return line + 1, offset - starts[line] + 1

        def span(self, start: int, end: int) -> Span:
            size = len(self.text)
            start = 0 if start < 0 else size if start > size else start
            end = start if end < start else size if end > size else end
            starts = self.line_starts
            line = bisect.bisect_right(starts, start)  # 1-based: starts[line - 1] <= start
            end_line = line
            if line < len(starts) and starts[line] <= end:  # the span runs onto a later line
                end_line = bisect.bisect_right(starts, end, line)
            return Span(self.name, line, start - starts[line - 1] + 1, end_line,
                        end - starts[end_line - 1] + 1)

        def line_text(self, line: int) -> str:
            starts = self.line_starts
            if not 1 <= line <= len(starts):
                return ""
            start = starts[line - 1]
            end = self.text.find("\n", start)
            return self.text[start:] if end < 0 else self.text[start:end]

    return Span, Source


# Span and Source, built on first use
__getattr__ = built_on_first_use(globals(), _RECORDS, _records)


def file_name(path: str) -> str:
    """The one form in which every location names a file, at compile time and at run time:
    absolute, with `.`, `..` and symbolic links resolved (as the original names files in its
    messages: `creates a cycle: /abs/dir/a.lobster is already being executed`). A name in
    angle brackets (`<pipeline>`, `<stdin>`) is not a file and is kept."""
    if not path or path.startswith("<"):
        return path
    return os.path.realpath(path)


def located(directory: str, name: str) -> str:
    """A program's file-table name (vm.isa.program.Program.files: relative to the main file's
    directory, so that programs hold no absolute path) in the form of file_name, given that
    directory in that form. Without a directory (an inline pipeline, an old frame) the name
    stays as it is."""
    if not directory or not name or name.startswith("<") or os.path.isabs(name):
        return name
    return os.path.normpath(os.path.join(directory, name))


def excerpt(source: Source, span: Span) -> str:
    """The span's first line with a caret underline, prefixed by the line number."""
    text = source.line_text(span.line).rstrip("\r")
    width = span.end_col - span.col if span.end_line == span.line else len(text) - span.col + 1
    width = max(1, width)
    gutter = str(span.line)
    pad = " " * len(gutter)
    return f"  {gutter} | {text}\n  {pad} | {' ' * (span.col - 1)}{'^' * width}"


def read_source(path: str, name: str | None = None) -> Source | None:
    """The text of the file at `path` (shown as `name`), or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return __getattr__("Source")(name or path, fh.read())
    except (OSError, UnicodeDecodeError):
        return None


def render(span: Span | None, code: str, message: str, *, severity: str = "error",
           help: str | None = None, source: Source | None = None) -> str:
    """`file:line:col: severity[CODE]: message`, the source line with a caret, and help.
    Without a matching `source`, the file the span names is read, if there is one."""
    where = f"{span}: " if span else ""
    out = [f"{where}{severity}[{code}]: {message}"]
    if span and (source is None or source.name != span.source):
        source = read_source(span.source)
    if span and source is not None:
        out.append(excerpt(source, span))
    if help:
        out.append(f"  help: {help}")
    return "\n".join(out)


def render_trap(failed, *, base_dir: str = ".", source: Source | None = None) -> str:
    """A runtime trap (vm.engine.outcome.Failed) printed like a compile error. Its file is named
    as file_name names it (a bare file-table name, from a run without the main file's
    directory, is read from `base_dir`); `source` gives the text of a source that is not a
    file (an inline pipeline)."""
    if failed.span is None or failed.file is None:
        return render(None, failed.code, failed.message)
    span = __getattr__("Span")(failed.file, *failed.span)
    if source is None or source.name != failed.file:
        source = read_source(os.path.join(base_dir, failed.file), failed.file)
    return render(span, failed.code, failed.message, source=source)
