"""How a run of the machine ends: finished, parked at a halt, or failed."""

from __future__ import annotations

from attrs import frozen

from vm.isa.frame import Frame


@frozen
class Finished:
    output: list


@frozen
class Parked:
    frame: Frame


@frozen
class Failed:
    """A trap: its stable code and message, and where it happened (the file is a name from
    Program.files; the span is line, col, end_line, end_col)."""

    code: str
    message: str
    file: str | None = None
    span: tuple[int, int, int, int] | None = None

    @property
    def location(self) -> tuple[int, int] | None:
        return (self.span[0], self.span[1]) if self.span else None


Outcome = Finished | Parked | Failed
