"""What every store holds and promises (`StateStore`) and the names it accepts. The backends:
the state directory (`directory.py`) and PostgreSQL (`postgres.py`); claim records: `claims.py`."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from vm.core import js, json_write
from vm.core.patterns import compiled
from vm.core.records import named_tuple

if TYPE_CHECKING:
    from vm.host.store.claims import Claimant, ClaimRecord


class StoreError(Exception):
    """The store could not be read or written, or was given a name it cannot hold."""

    code = "T450"


class Fenced(StoreError):
    """A claim's holder lost it: its lease lapsed and the checkpoint was cancelled or taken
    over meanwhile (its fencing token is stale). The holder stops before its next step and
    writes nothing more (T437)."""

    code = "T437"


class ApprovalIdTaken(StoreError):
    """`park` was given an approval id to publish with its frame, and another checkpoint has
    it: nothing was parked; draw another id and park again."""


class SigningKeyError(StoreError):
    """The signing key set cannot be used: lost while checkpoints need it (T451), or a key
    that is no key (too short, open to others, not a regular file: T452). One line."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


KEY_BYTES = 32  # a key the store makes
KEY_MIN_BYTES = 32  # a shorter key is refused (an empty one would sign anything for anyone)
KEY_MAX_BYTES = 4096


def key_id(key: bytes) -> str:
    """A key's public name (8 hex digits): derived from it one way, never the key itself."""
    return hmac.new(bytes(key), b"lobster-key-id", hashlib.sha256).hexdigest()[:8]


def check_key(key: bytes, where: str) -> bytes:
    """`key` if it is long enough to sign with, else a SigningKeyError (T452) naming `where`."""
    if not KEY_MIN_BYTES <= len(key) <= KEY_MAX_BYTES:
        raise SigningKeyError(
            f"the signing key {where} is {len(key)} byte{'' if len(key) == 1 else 's'}; a key "
            f"is {KEY_MIN_BYTES} to "
            f"{KEY_MAX_BYTES} bytes (restore it from a backup; every checkpoint it signed "
            "needs it)", "T452")
    return key


def lost_key_error(location: str, where: str, checkpoints: int) -> SigningKeyError:
    """The refusal of a store whose key set is gone while `checkpoints` wait (T451)."""
    plural = "" if checkpoints == 1 else "s"
    return SigningKeyError(
        f"the signing key of the state store at {location} is missing ({where}), and "
        f"{checkpoints} checkpoint{plural} signed with it cannot be verified or resumed: restore "
        "the key from a backup, or cancel them (`lobster pending`, `lobster cancel --id ID`); "
        "`lobster key rotate` starts a new key", "T451")


@named_tuple
class KeyInfo:
    """One key of a store's key set, as `key_set` lists it (never the secret)."""

    number: int  # 1 for the first key; each rotation adds the next number
    id: str  # key_id
    created_at: float  # unix seconds


def default_state_dir(env: Mapping[str, str] = os.environ) -> str:
    configured = (env.get("LOBSTER_STATE_DIR") or "").strip()
    return configured or os.path.join(os.path.expanduser("~"), ".lobster", "state")


_IDENTITY: list[tuple[int, str]] = []  # this process's (pid, host name), once asked


def process_identity() -> tuple[int, str]:
    """This process's pid and host name, as a claim records them: asked of the system once
    per process (again in a forked child). A host renamed while a gateway runs keeps its old
    name in that gateway's claims."""
    if not _IDENTITY:
        _IDENTITY.append((os.getpid(), os.uname().nodename))  # uname: socket not loaded
    return _IDENTITY[0]


os.register_at_fork(after_in_child=_IDENTITY.clear)


STATE_KEY = compiled(r"[A-Za-z0-9_-]{1,128}")  # a run key: never a path
APPROVAL_ID = compiled(r"[0-9a-f]{8}")
CACHE_NAME = compiled(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a cache kind or key: never a path
_KEY_CHARS = compiled(r"[^a-z0-9._-]+")


def value_name(key: str) -> str:
    """`state.*` key -> stored name, as the reference normalises it (`_Demo KEY_` -> demo_key)."""
    name = re.sub(r"_+", "_", _KEY_CHARS.sub("_", key.lower())).strip("_")
    if not name:
        raise StoreError("state key is empty/invalid")
    return name


def value_json(value: Any) -> str:
    """A `state.*` value as stored: pretty JSON (an undefined property left out, as
    JSON.stringify leaves it). A lone undefined (`map --unwrap` of an absent field) has no
    JSON text: it is stored as the original stores it, the text `undefined`, which a later
    `state.get` refuses as JSON.parse does and `diff.last` reads as nothing stored. A lone
    surrogate (a child may print one) is kept as its JSON escape, so the text is always valid
    UTF-8 and reads back the same."""
    if value is js.UNDEFINED:
        return "undefined\n"
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    except TypeError:  # undefined somewhere (`pick` of a field an item lacks)
        text = json.dumps(json_write.without_undefined(value), indent=2, ensure_ascii=False) + "\n"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def value_file_name(key: str) -> str:
    return value_name(key) + ".json"


def approval_id_form(approval_id: str) -> str | None:
    """The id as stored, or None: 8 lowercase hex digits exactly once trimmed (as the original
    trims; nothing else is forgiven)."""
    approval_id = approval_id.strip()
    return approval_id if APPROVAL_ID.fullmatch(approval_id) else None


def cache_name(kind: str, key: str) -> tuple[str, str]:
    if not (CACHE_NAME.fullmatch(kind) and CACHE_NAME.fullmatch(key)) \
            or max(len(kind), len(key)) > 128:
        raise StoreError(f"invalid cache entry name {kind!r}/{key!r}")
    return kind, key


@named_tuple
class Parked:
    """A parked frame as the store holds it: its bytes, when it was parked and when it expires
    (unix seconds; None: never), and the MAC the store wrote with it (None: a frame from a
    version that wrote none)."""

    state_key: str
    blob: bytes
    created_at: float
    expires_at: float | None = None
    mac: bytes | None = None

    def authentic(self, keys: bytes | Sequence[bytes] | None) -> bool:
        """Whether this store wrote these bytes under this state key: its MAC matches under
        the key, or one key of the key set, given."""
        if keys is None or self.mac is None:
            return False
        return any(hmac.compare_digest(self.mac, frame_mac(key, self.state_key, self.blob))
                   for key in ([keys] if isinstance(keys, bytes) else keys))


FRAME_MAC_SIZE = 32


def frame_mac(key: bytes, state_key: str, blob: bytes) -> bytes:
    """HMAC-SHA256, under the store's signing key, of a frame's bytes and the state key it is
    parked under (the frame names its program's content hash, so the program is covered too):
    a frame planted, edited or moved to another key does not match."""
    mac = hmac.new(bytes(key), b"lobster-frame\x001\x00", hashlib.sha256)
    mac.update(state_key.encode("utf-8") + b"\x00")
    mac.update(blob)
    return mac.digest()


@named_tuple
class CacheEntry:
    """One cache entry as `list_cache` gives it."""

    kind: str
    key: str
    written_at: float  # unix seconds


class StateStore(Protocol):
    """Programs by hash, parked frames by state key, approval ids, the signing key, claim
    records, `state.*` values and cache entries. Both backends keep the same guarantees:

    - a program, frame or value is written whole or not at all;
    - an approval id published just before save_frame is durable when save_frame returns, and
      a frame is durable when save_frame returns;
    - of any number of concurrent claim_frame calls for one frame, exactly one returns True;
    - approval ids are matched exactly (trimmed), and lead only to a plain state key;
    - a frame is stored with its MAC, so a frame this store did not write is told apart
      (`Parked.authentic`);
    - cache entries are hints: they may be lost, never half-written.
    """

    location: str  # where the store is, for messages (a directory, or a URL without password)
    # saves of a stored program closer together than this may leave its last-saved time (what
    # list_programs gives and remove_program compares) unmoved; gc widens its window by it
    program_touch_s: float

    def key(self) -> bytes:
        """The signing key (the newest of the key set), made (32 random bytes) on first use;
        the first maker wins. Never made while checkpoints exist: then a SigningKeyError
        (T451) says the key set is lost. A key that is no key is a SigningKeyError (T452)."""

    def existing_key(self) -> bytes | None:
        """The signing key if one was made, without making one."""

    def keys(self) -> list[bytes]:
        """Every key that verifies (the key set), newest first; [] when none was made."""

    def verification_keys(self) -> list[bytes]:
        """`keys()`, or a SigningKeyError (T451) when there are none while checkpoints exist."""

    def key_set(self) -> list[KeyInfo]:
        """The key set as ids and numbers, newest (the signing key) first."""

    def rotate_key(self) -> KeyInfo:
        """Add a new key, the signing key from now on; the others keep verifying. Makes the
        first key even while checkpoints exist (an explicit act, unlike `key()`)."""

    def retire_key(self, number: int) -> bool:
        """Remove a key that is not the newest (gc: when no checkpoint needs it)."""

    def count_checkpoints(self) -> int:
        """Parked frames and unfinished claims."""

    def save_program(self, program_hash: str, encode: Callable[[], bytes],
                     intact: Callable[[bytes], bool] | None = None) -> None:
        """Store a program once: `encode()` is called only when none of that hash is stored,
        or when `intact` says the stored bytes are not that program (then it is rewritten)."""

    def load_program_bytes(self, program_hash: str) -> bytes | None:
        """The stored bytes of a program, or None."""

    def list_programs(self) -> list[tuple[str, float]]:
        """(hash, last saved) of every stored program: save_program of a stored one counts."""

    def remove_program(self, program_hash: str, unused_since: float) -> bool:
        """Remove the program unless it was saved at or after `unused_since` (unix seconds)."""

    def save_frame(self, state_key: str, blob: bytes, expires_at: float | None = None,
                   key: bytes | None = None) -> None:
        """Park a frame (durable when this returns), with its expiry (unix seconds) if any,
        and its MAC (`frame_mac` under `key`, default the store's signing key: the caller
        passes the key it signed the frame's token with)."""

    def park(self, state_key: str, blob: bytes, expires_at: float | None, key: bytes,
             program_hash: str, encode: Callable[[], bytes],
             approval_id: str | None = None) -> None:
        """A halt's writes: its program (as `save_program`, checked intact) and then its frame
        (as `save_frame`), so the frame never names a program the store does not hold; one
        statement where the backend allows it. `approval_id`: one `new_approval_id(...,
        deferred=True)` drew, published with the frame (ApprovalIdTaken, and nothing parked,
        when another checkpoint has it)."""

    def read_frame(self, state_key: str) -> bytes | None:
        """The parked frame, or None when there is none or it has been claimed."""

    def read_parked(self, state_key: str) -> Parked | None:
        """The parked frame with its times, or None when there is none or it was claimed."""

    def list_parked(self) -> list[Parked]:
        """Every parked (unclaimed) frame, oldest first."""

    def claim_frame(self, state_key: str, claimant: Claimant | None = None,
                    lease_until: float | None = None, record: bytes | None = None) -> bool:
        """Take the frame for this resume (read it first): exactly one concurrent caller gets
        True. With a claimant, a claim record (with its lease, unix seconds) stays until
        finish_claim or settle_claim; `record` (the checkpoint's lifecycle record) is
        written with the claim and durable with it."""

    def claim_checkpoint(self, state_key: str, claimant: Claimant, lease_until: float,
                         record: dict) -> dict | None:
        """claim_frame with a lifecycle record: `record` (JSON data) is written with the claim,
        its events after those of a record already there (a checkpoint released and parked
        again keeps its history). Returns the record as written, None when not taken."""

    def renew_claim(self, state_key: str, lease_until: float) -> bool:
        """Extend a claim's lease (not necessarily durable); False when it has no claim."""

    def finish_claim(self, state_key: str) -> None:
        """Remove the claimed frame and its claim record (nothing to do when there is none)."""

    def repark(self, state_key: str, blob: bytes, expires_at: float | None,
               key: bytes | None = None) -> None:
        """This process's claim ends with `blob` parked in its place, waiting again (a
        migration): never a moment without the frame, and never another caller's claim
        removed (one that took the new frame at once keeps it)."""

    def in_doubt(self) -> list[ClaimRecord]:
        """Every claim not finished (live lease or not), oldest first. The lifecycle
        (vm/host/store/lifecycle.py) tells live ones from those in doubt."""

    def write_record(self, state_key: str, record: bytes, durable: bool = True) -> None:
        """Replace a checkpoint's lifecycle record (JSON bytes), whole or not at all."""

    def settle_claim(self, state_key: str, record: bytes, durable: bool = True) -> None:
        """A claim ends: write its record, then remove the claimed frame (a crash between the
        two leaves the record, which wins)."""

    def read_record(self, state_key: str) -> bytes | None:
        """A checkpoint's lifecycle record, or None."""

    def list_records(self, ended: bool = True) -> list[tuple[str, bytes]]:
        """(state key, record) of every lifecycle record; with `ended=False` those of ended
        checkpoints (tombstones) may be left out."""

    def remove_record(self, state_key: str) -> None:
        """Forget a checkpoint's record (gc of a tombstone)."""

    def claim_record(self, state_key: str) -> ClaimRecord | None:
        """The record of a claim of this frame that has not finished, if there is one."""

    def new_approval_id(self, state_key: str, deferred: bool = False) -> str | None:
        """A fresh 8-hex id naming `state_key`, never one in use; follow with save_frame.
        `deferred`: the id may instead be drawn only, to be published by the `park` it is
        given to (the PostgreSQL store: one round trip for the halt, not two); a store that
        publishes it at once ignores the `park`'s."""

    def lookup_approval_id(self, approval_id: str) -> str | None:
        """The state key an approval id names, or None (unknown, malformed or dangling)."""

    def remove_approval_id(self, approval_id: str | None) -> None:
        """Forget an approval id (None, or one already gone: nothing to do)."""

    def get_value(self, key: str, default: Any = None, strict: bool = False) -> Any:
        """The value stored under `key`, `default` when there is none; one that is not JSON is
        `default` too, or with `strict` a StoreError carrying the parser's message."""

    def set_value(self, key: str, value: Any) -> None:
        """Store a `state.set` value (JSON data), replacing any earlier one."""

    def get_cache(self, kind: str, key: str) -> bytes | None:
        """A cache entry's bytes, or None (a miss)."""

    def put_cache(self, kind: str, key: str, blob: bytes) -> None:
        """Write a cache entry (whole or not at all; not necessarily durable)."""

    def list_cache(self) -> list[CacheEntry]:
        """Every cache entry, with when it was written."""

    def remove_cache(self, kind: str, key: str) -> None:
        """Remove a cache entry, if present."""

    def leftovers(self, older_than: float) -> list[str]:
        """Names of what interrupted writes left behind before `older_than` (unix seconds):
        temporary files, approval ids whose frame was never written or is gone."""

    def remove_leftover(self, name: str) -> bool:
        """Remove one name `leftovers` gave, if it is still a leftover; True when removed."""
