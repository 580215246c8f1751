"""Claim records: who took a parked frame, and when (imported only where claims are used)."""

from __future__ import annotations

import os
from typing import Any

from attrs import field, frozen


def _hostname() -> str:
    import socket

    return socket.gethostname()


@frozen
class Claimant:
    """Who took a frame, and what it resumed (kind: "approval", "input", ...; halt_id: the
    approval id or other name of the halt)."""

    kind: str = ""
    halt_id: str = ""
    pid: int = field(factory=os.getpid)
    host: str = field(factory=_hostname)

    def to_json(self) -> dict:
        return {"kind": self.kind, "haltId": self.halt_id, "pid": self.pid, "host": self.host}

    @classmethod
    def from_json(cls, data: Any) -> Claimant | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(kind=str(data.get("kind", "")), halt_id=str(data.get("haltId", "")),
                       pid=int(data.get("pid", 0)), host=str(data.get("host", "")))
        except (TypeError, ValueError):
            return None


@frozen
class ClaimRecord:
    """A frame taken by a resume that has not said it finished. `claimant` is None where the
    claim is known but its record is not (a crash between the two)."""

    state_key: str
    claimed_at: float  # unix seconds
    claimant: Claimant | None
