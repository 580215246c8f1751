"""How a run of the machine ends: finished, parked at a halt, or failed; and where a failure
happened."""

from __future__ import annotations

from vm.core.records import frozen
from vm.core.source import located
from vm.isa.frame import Frame
from vm.isa.program import Program


@frozen
class Finished:
    output: list


@frozen
class Parked:
    frame: Frame


@frozen
class Failed:
    """A trap: its stable code and message, and where it happened (the file as `location`
    names it; the span is line, col, end_line, end_col), and the error's detail for the
    envelope (vm.host.commands.base.CommandError.detail)."""

    code: str
    message: str
    file: str | None = None
    span: tuple[int, int, int, int] | None = None
    detail: dict | None = None

    @property
    def location(self) -> tuple[int, int] | None:
        return (self.span[0], self.span[1]) if self.span else None


Outcome = Finished | Parked | Failed


def location(program: Program, pc: int, source_dir: str = ""
             ) -> tuple[str | None, tuple[int, int, int, int] | None]:
    """The file and span (line, col, end_line, end_col) of the instruction at `pc`. The file is
    named in the one form of every location (vm.core.source.file_name): its file-table name
    from `source_dir`, the main file's directory the frame carries."""
    loc = program.source_map[pc] if 0 <= pc < len(program.source_map) else None
    if loc is None:
        return None, None
    files = program.files
    file = files[loc[0]] if 0 <= loc[0] < len(files) else program.header.source_name
    return located(source_dir, file), tuple(loc[1:])
