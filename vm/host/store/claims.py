"""Claim records: who took a parked frame, and when (imported only where claims are used)."""

from __future__ import annotations

import json
from typing import Any

from attrs import field

from vm.core import json_write
from vm.core.records import frozen
from vm.host.store.base import process_identity
from vm.host.token import b64url, from_b64url


def _pid() -> int:
    return process_identity()[0]


def _hostname() -> str:
    return process_identity()[1]


@frozen
class Claimant:
    """Who took a frame, and what it resumed (kind: "approval", "input", ...; halt_id: the
    approval id or other name of the halt)."""

    kind: str = ""
    halt_id: str = ""
    pid: int = field(factory=_pid)
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
    lease_until: float | None = None  # unix seconds; None or past: no live holder


# The state directory's claim record is the name of the claimed frame file:
# `<state_key>.<record>.claimed`, the record being base64url (no padding) of the JSON
# {"claimedAt": unix seconds, "claimant": Claimant.to_json()}. One rename takes the frame and
# writes the record, and one directory sync makes both durable.
CLAIM_SUFFIX = ".claimed"
_NAME_MAX = 255


def _b64(data: dict) -> str:
    text = json_write.plain_dumps(data)
    return b64url(text.encode("ascii"))


def claim_file_name(state_key: str, claimant: Claimant, claimed_at: float) -> str:
    """The file name a frame is renamed to when `claimant` claims it. Within a name's 255
    bytes: a long halt id is left out, then the host name shortened (the pid stays)."""
    who = claimant.to_json()
    for _ in range(3):
        name = f"{state_key}.{_b64({'claimedAt': claimed_at, 'claimant': who})}{CLAIM_SUFFIX}"
        if len(name) <= _NAME_MAX:
            return name
        if who["haltId"]:
            who = {**who, "haltId": ""}
        else:
            who = {**who, "host": who["host"][:32]}
    return f"{state_key}.{_b64({'claimedAt': claimed_at})}{CLAIM_SUFFIX}"


def parse_claim_file_name(name: str) -> tuple[str, ClaimRecord | None] | None:
    """(state key, its record) for a claim file name, the record None for the name of an
    earlier version (`<state_key>.claimed`, its record in the file); None for any other name."""
    if not name.endswith(CLAIM_SUFFIX) or name.startswith("."):
        return None
    state_key, dot, encoded = name[:-len(CLAIM_SUFFIX)].partition(".")
    if not dot:
        return state_key, None
    try:
        data = json.loads(from_b64url(encoded))
        return state_key, ClaimRecord(state_key, float(data["claimedAt"]),
                                      Claimant.from_json(data.get("claimant")))
    except (ValueError, TypeError, KeyError):
        return None
