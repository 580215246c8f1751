"""vm.core.digest: the run path's SHA-256, HMAC-SHA256 and base64url are the standard
library's."""

from __future__ import annotations

import base64
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


@given(st.sampled_from([0, 1, 4096]), st.integers(min_value=-2, max_value=2))
def test_inputs_around_large_give_the_same_digests_either_way(extra, offset):
    # at digest.LARGE bytes and past it, the digests come from OpenSSL (hashlib, hmac): the
    # same values as below it
    size = digest.LARGE + extra + offset
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert digest.sha256_of(data).hexdigest() == hashlib.sha256(data).hexdigest()
    assert digest.sha256_of(data).digest() == digest.sha256(data).digest()
    key = b"k" * 32
    parts = (b"head\x00", data[: size // 3], data[size // 3:])
    expected = hmac.new(key, b"".join(parts), hashlib.sha256).digest()
    assert digest.hmac_sha256(key, *parts) == expected
    inner, outer = digest._padded(key)  # the path below LARGE, by hand, over the same parts
    inner = inner.copy()
    for part in parts:
        inner.update(part)
    outer = outer.copy()
    outer.update(inner.digest())
    assert outer.digest() == expected


def test_keys_at_and_past_the_block_size():
    for size in (0, 63, 64, 65, 200):
        key = bytes(range(size % 256)) * (size // 256 + 1)
        key = key[:size]
        assert digest.hmac_sha256(key, b"m") == hmac.new(key, b"m", hashlib.sha256).digest()


def test_equal_compares_bytes():
    assert digest.equal(b"abc", b"abc") and not digest.equal(b"abc", b"abd")


@given(st.binary(max_size=300))
def test_b64url_is_base64s_without_padding(data):
    assert digest.b64url(data) == base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert digest.from_b64url(digest.b64url(data)) == data


def _stdlib_decode(text: str):
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as exc:
        return type(exc)


@given(st.one_of(st.text(max_size=40),
                 st.text(alphabet="ABCabc0189-_+/=*. \n", max_size=40)))
def test_from_b64url_reads_any_text_as_base64_does(text):
    """Tokens and claim file names are untrusted: every text decodes to what the standard
    library gives, or fails with a ValueError where it fails."""
    expected = _stdlib_decode(text)
    try:
        got = digest.from_b64url(text)
    except ValueError:
        assert isinstance(expected, type) and issubclass(expected, ValueError)
    else:
        assert got == expected
