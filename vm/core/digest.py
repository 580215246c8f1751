"""SHA-256, HMAC-SHA256 and base64url for the run path, without loading OpenSSL or `base64`.

`hashlib` and `hmac` import `_hashlib`, which loads OpenSSL's libcrypto: about 3 ms of a cold
`lobster` start that needs one or two digests (the compile-cache key, a program's hash, a
checkpoint's MAC). CPython also ships its own SHA-256 (`_sha2` from 3.12, `_sha256` before),
which loads in a tenth of that; `hashlib.sha256` is the fallback where a build leaves it out.
CPython's own runs at about 250 MB/s on the test machine, OpenSSL's (on the CPU's SHA
instructions) at about 1.5 GB/s: `sha256_of` and `hmac_sha256` hand an input of LARGE bytes or
more to OpenSSL, loaded then (a frame or the items of a halt holding megabytes of output).
HMAC is RFC 2104 over that digest (tests/machine/test_digest.py holds it to `hmac.new`).
The unpadded base64url of tokens and claim names is binascii's base64 with two letters
swapped, as `base64` makes it (importing `base64` cost 2 million instructions of a cold start).
"""

from __future__ import annotations

import binascii
from functools import lru_cache
from typing import Any

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

__all__ = ["LARGE", "b64url", "equal", "from_b64url", "hmac_sha256", "sha256", "sha256_of"]

LARGE = 1 << 19  # bytes from which OpenSSL's SHA-256 pays for its loading (2.5 ms) at once

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


def sha256_of(data: bytes) -> Any:
    """`sha256(data)`: OpenSSL's for LARGE data or more, else CPython's own."""
    if len(data) >= LARGE:
        import hashlib

        return hashlib.sha256(data)
    return sha256(data)


def hmac_sha256(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the concatenation of `parts` under `key` (RFC 2104); OpenSSL's (`hmac`)
    when they hold LARGE bytes or more."""
    if sum(map(len, parts)) >= LARGE:
        import hmac

        mac = hmac.new(bytes(key), digestmod="sha256")  # any bytes-like key, as below
        for part in parts:
            mac.update(part)
        return mac.digest()
    inner_start, outer_start = _padded(bytes(key))
    inner = inner_start.copy()
    for part in parts:
        inner.update(part)
    outer = outer_start.copy()
    outer.update(inner.digest())
    return outer.digest()


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def b64url(raw: bytes) -> str:
    """`raw` in base64url without padding: `base64.urlsafe_b64encode(raw)` less its `=`."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


def from_b64url(text: str) -> bytes:
    """The bytes of base64url `text`, its padding optional: what `base64.urlsafe_b64decode`
    gives for it padded, and the same ValueError where that raises one (a text that is not
    ASCII, a length no padding mends)."""
    data = text.encode("ascii")
    return binascii.a2b_base64((data + b"=" * (-len(data) % 4)).translate(_FROM_URLSAFE))
