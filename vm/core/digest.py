"""SHA-256 and HMAC-SHA256 for the run path, without loading OpenSSL.

`hashlib` and `hmac` import `_hashlib`, which loads OpenSSL's libcrypto: about 3 ms of a cold
`lobster` start that needs one or two digests (the compile-cache key, a program's hash, a
checkpoint's MAC). CPython also ships its own SHA-256 (`_sha2` from 3.12, `_sha256` before),
which loads in a tenth of that; `hashlib.sha256` is the fallback where a build leaves it out.
HMAC is RFC 2104 over that digest (tests/machine/test_digest.py holds it to `hmac.new`).
"""

from __future__ import annotations

from functools import lru_cache

try:
    from _sha2 import sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # pragma: no cover - a build without CPython's own digests
        from hashlib import sha256

try:
    from _operator import _compare_digest as equal  # what hmac.compare_digest falls back to
except ImportError:  # pragma: no cover
    from hmac import compare_digest as equal

__all__ = ["equal", "hmac_sha256", "sha256"]

_BLOCK = 64  # SHA-256's block size in bytes
_INNER = bytes(byte ^ 0x36 for byte in range(256))
_OUTER = bytes(byte ^ 0x5C for byte in range(256))


@lru_cache(maxsize=16)
def _padded(key: bytes) -> tuple:
    """The digests of a key's two padded blocks: a process signs and checks with one or two
    keys, so each is padded and digested once and its states copied per message (a copy is a
    memcpy; hashing a block is not)."""
    block = (sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
    return sha256(block.translate(_INNER)), sha256(block.translate(_OUTER))


def hmac_sha256(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the concatenation of `parts` under `key` (RFC 2104)."""
    inner_start, outer_start = _padded(bytes(key))
    inner = inner_start.copy()
    for part in parts:
        inner.update(part)
    outer = outer_start.copy()
    outer.update(inner.digest())
    return outer.digest()
