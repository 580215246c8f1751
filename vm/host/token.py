"""Resume tokens: short signed pointers to a parked frame.

A token is base64url of compact JSON `{"protocolVersion":1,"v":1,"kind":K,"stateKey":S,
"sig":G}` (the reference's shape plus `sig`, an HMAC-SHA256 of the other fields under the
store's key). The token carries no state: it is useless without the store that issued it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Sequence

from vm.core import json_write
from vm.core.patterns import compiled
from vm.core.records import frozen

KINDS = {"pipeline-resume": "pipeline", "workflow-file": "workflow"}
_STATE_KEY = compiled(r"^(pipeline|workflow)_resume_[0-9a-f]{32}$")


def new_state_key(origin: str) -> str:
    """A fresh key for a checkpoint of a run of that origin ("pipeline" | "workflow"); the
    key names its origin, as the reference's keys do."""
    return f"{origin}_resume_{os.urandom(16).hex()}"


def origin_of(state_key: str) -> str:
    """The origin named by a key that new_state_key made (a store hands back only those)."""
    return state_key.partition("_")[0]


def kind_for(origin: str) -> str:
    """The token kind of a checkpoint of that origin."""
    return next(kind for kind, named in KINDS.items() if named == origin)


class TokenError(Exception):
    """A token that cannot be used; `message` is the envelope's text."""

    def __init__(self, message: str, code: str = "E501") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@frozen
class Token:
    kind: str  # "pipeline-resume" | "workflow-file"
    state_key: str
    sig: str

    @property
    def origin(self) -> str:
        return KINDS[self.kind]


def b64url(raw: bytes) -> str:
    """`raw` in base64url without its `=` padding (tokens and claim names)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """The bytes of base64url `text`, its padding optional; ValueError for a text that is not
    ASCII or whose length no padding mends."""
    data = text.encode("ascii")
    return base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))


def _sign(kind: str, state_key: str, key: bytes) -> str:
    mac = hmac.new(bytes(key), f"1\x001\x00{kind}\x00{state_key}".encode(),
                   hashlib.sha256).digest()
    return b64url(mac[:18])


def issue(kind: str, state_key: str, key: bytes) -> str:
    body = {"protocolVersion": 1, "v": 1, "kind": kind, "stateKey": state_key,
            "sig": _sign(kind, state_key, key)}
    raw = json_write.plain_dumps(body).encode()
    return b64url(raw)


def _is_one(value) -> bool:
    """The number 1, as the reference's `=== 1` sees it (not `true`, which Python calls 1)."""
    return not isinstance(value, bool) and value == 1


def decode(text: str) -> Token:
    """Parse a token's shape (errors worded as the reference words them); no signature check."""
    try:
        data = json.loads(from_b64url(text).decode("utf-8"))
    except (ValueError, UnicodeError, RecursionError):  # (nesting: a crafted token)
        raise TokenError("Invalid token") from None
    if not isinstance(data, dict):
        raise TokenError("Invalid token")
    if not _is_one(data.get("protocolVersion")):
        raise TokenError("Unsupported protocol version")
    if not _is_one(data.get("v")):
        raise TokenError("Unsupported token version")
    kind, state_key = data.get("kind"), data.get("stateKey")
    if not isinstance(kind, str) or kind not in KINDS:
        raise TokenError("Invalid token")
    if not isinstance(state_key, str) or not _STATE_KEY.match(state_key) \
            or not state_key.startswith(KINDS[kind]):
        raise TokenError("Invalid workflow token" if kind == "workflow-file" else "Invalid token")
    sig = data.get("sig")
    if not isinstance(sig, str):
        raise TokenError("Invalid token: unsigned (tokens are signed by the state directory that "
                         "issued them)", code="E502")
    return Token(kind, state_key, sig)


def verify(token: Token, keys: bytes | Sequence[bytes] | None) -> None:
    """The token's signature matches under the key, or one key of the key set, given."""
    given = token.sig.encode("utf-8", "surrogatepass")
    # bytes: a constant-time compare refuses str with non-ASCII (a forged sig may have them)
    if not any(hmac.compare_digest(given, _sign(token.kind, token.state_key, key).encode("ascii"))
               for key in ([] if keys is None else [keys] if isinstance(keys, bytes) else keys)):
        raise TokenError("Invalid token: signature does not match this state directory",
                         code="E502")
