"""SHA-256 and HMAC-SHA256 for the run path, without loading OpenSSL.

`hashlib` and `hmac` import `_hashlib`, which loads OpenSSL's libcrypto: about 3 ms of a cold
`lobster` start that needs one or two digests (the compile-cache key, a program's hash, a
checkpoint's MAC). CPython also ships its own SHA-256 (`_sha2` from 3.12, `_sha256` before),
which loads in a tenth of that; `hashlib.sha256` is the fallback where a build leaves it out.
HMAC is RFC 2104 over that digest (tests/machine/test_digest.py holds it to `hmac.new`).
"""

from __future__ import annotations

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


def hmac_sha256(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the concatenation of `parts` under `key` (RFC 2104)."""
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_INNER))
    for part in parts:
        inner.update(part)
    return sha256(key.translate(_OUTER) + inner.digest()).digest()
