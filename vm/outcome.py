"""How a run of the machine ends: finished, parked at a halt, or failed."""

from __future__ import annotations

from attrs import frozen

from vm.frame import Frame


@frozen
class Finished:
    output: list


@frozen
class Parked:
    frame: Frame


@frozen
class Failed:
    code: str
    message: str
    location: tuple[int, int] | None = None


Outcome = Finished | Parked | Failed
