"""vm.core.digest: the run path's SHA-256 and HMAC-SHA256 are the standard library's."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from vm.core import digest


@given(st.binary(max_size=300))
def test_sha256_is_hashlib_s(data):
    assert digest.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


@given(st.binary(max_size=200), st.lists(st.binary(max_size=100), max_size=4))
def test_hmac_sha256_is_hmac_new_s(key, parts):
    expected = hmac.new(key, b"".join(parts), hashlib.sha256).digest()
    assert digest.hmac_sha256(key, *parts) == expected


def test_keys_at_and_past_the_block_size():
    for size in (0, 63, 64, 65, 200):
        key = bytes(range(size % 256)) * (size // 256 + 1)
        key = key[:size]
        assert digest.hmac_sha256(key, b"m") == hmac.new(key, b"m", hashlib.sha256).digest()


def test_equal_compares_bytes():
    assert digest.equal(b"abc", b"abc") and not digest.equal(b"abc", b"abd")
