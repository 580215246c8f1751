"""The PostgreSQL store: a StateStore in the tables of vm/host/store/postgres_schema.py, reached
through the per-URL pool of vm/host/store/postgres_pool.py.

A statement whose connection broke is run once more on a tested connection, except the claim:
its first attempt may have committed with the answer lost, and a second would then find the
frame claimed and report a claim that happened as none; that failure is a store error, and a
claim that was made reads as in doubt (with a claim record; a claim by DELETE, without one, is
gone: the claim record exists for that).

Frames, claims, values and the key are committed durably. A halt is one statement, one
durable commit: its program, its approval id (drawn before the frame is written, since the
frame holds it, and published by that statement, which parks nothing if another checkpoint has
the id) and its frame. Approval ids published on their own (`new_approval_id`) are committed
with synchronous_commit off: the frame's durable commit that follows flushes the WAL past them,
so they are durable before a token or id is handed out. Removed approval ids,
finished claims and cache entries are also committed lazily: a crash can bring back an id whose
frame is gone (a lookup then finds no frame), or a finished claim as in doubt, never the reverse.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from vm.core import json_read
from vm.host.store.base import (KEY_BYTES, STATE_KEY, ApprovalIdTaken, CacheEntry, KeyInfo,
                                Parked, StoreError, approval_id_form, cache_name, check_key,
                                frame_mac, key_id, lost_key_error, value_json, value_name)
from vm.host.store.claims import Claimant, ClaimRecord
from vm.host.store.postgres_pool import shared_backend

KEY_REFRESH_S = 60  # a process re-reads the signing key this often (admin.py KEY_RETIRE_S)
PROGRAM_TOUCH_S = 60.0  # see PostgresStore.program_touch_s
_LAZY = "SELECT set_config('synchronous_commit', 'off', true)"


class PostgresStore:
    """A StateStore in a PostgreSQL database, named by a postgresql:// or postgres:// URL."""

    # a park touches a stored program's used_at only when it is this old: its row is locked
    # (until the park commits) only then, so parks of one program do not queue on it
    program_touch_s = PROGRAM_TOUCH_S

    def __init__(self, url: str) -> None:
        self._backend = shared_backend(url)
        self.location = self._backend.location
        self._read_keys: list[bytes] | None = None  # read with the last read_parked
        self._drawn: set[str] = set()  # approval ids drawn for a park, not published yet

    def _connection(self) -> AbstractContextManager[Any]:
        return self._backend.connection()

    def _one(self, sql: str, params: tuple = ()) -> tuple | None:
        """One statement, its first row (or None); run once more if its connection broke."""
        return self._backend.run(sql, params, retry=True)

    def _once(self, sql: str, params: tuple = ()) -> tuple | None:
        """A claim statement: never run twice (a lost answer may hide a claim made)."""
        return self._backend.run(sql, params, retry=False)

    def _lazy(self, sql: str, params: tuple = ()) -> tuple | None:
        """Run a statement that reads the one-row `lazy` (FROM/USING lazy), whose evaluation
        turns synchronous_commit off for this statement's transaction: any row it changes came
        through that join, so a commit that writes is never waited for. One round trip."""
        return self._backend.run(f"WITH lazy AS ({_LAZY}) {sql}", params, retry=True)

    # signing keys --------------------------------------------------------------------------
    def _key_rows(self) -> list[tuple[int, bytes, float]]:
        with self._connection() as conn:
            rows = conn.execute("SELECT id, key, extract(epoch FROM created_at)::float8"
                                " FROM lobster_keys ORDER BY id DESC").fetchall()
        found = [(n, check_key(bytes(key), f"{n} of {self.location}"), at)
                 for n, key, at in rows]
        if found:
            self._backend.key = (found[0][1], time.monotonic())
        return found

    def keys(self) -> list[bytes]:
        return [key for _, key, _ in self._key_rows()]

    def verification_keys(self) -> list[bytes]:
        """The key set; the one read_parked just read with its frame, if it did (a resume
        checks the frame it read right after, and needs no second round trip for the keys)."""
        keys, self._read_keys = self._read_keys, None
        if not keys:
            keys = self.keys()
        if not keys:
            count = self.count_checkpoints()
            if count:
                raise lost_key_error(self.location, "no row in lobster_keys", count)
        return keys

    def key_set(self) -> list[KeyInfo]:
        return [KeyInfo(n, key_id(key), at) for n, key, at in self._key_rows()]

    def key(self) -> bytes:
        """The newest key, read again at most every KEY_REFRESH_S (a rotation by another
        process is followed within that; gc keeps a superseded key far longer)."""
        cached = self._backend.key
        if cached is not None and time.monotonic() - cached[1] < KEY_REFRESH_S:
            return cached[0]
        keys = self.keys()
        if keys:
            return keys[0]
        # one statement: the first key of a store without keys and without frames
        self._one("INSERT INTO lobster_keys (id, key) SELECT 1, %s WHERE NOT EXISTS"
                  " (SELECT 1 FROM lobster_frames) AND NOT EXISTS (SELECT 1 FROM lobster_keys)"
                  " ON CONFLICT (id) DO NOTHING RETURNING 1", (secrets.token_bytes(KEY_BYTES),))
        keys = self.keys()
        if keys:
            return keys[0]  # the first maker's key
        raise lost_key_error(self.location, "no row in lobster_keys", self.count_checkpoints())

    def existing_key(self) -> bytes | None:
        keys = self.keys()
        return keys[0] if keys else None

    def rotate_key(self) -> KeyInfo:
        for _ in range(16):
            row = self._one("INSERT INTO lobster_keys (id, key) SELECT coalesce(max(id), 0) + 1,"
                            " %s FROM lobster_keys ON CONFLICT (id) DO NOTHING"
                            " RETURNING id, key, extract(epoch FROM created_at)::float8",
                            (secrets.token_bytes(KEY_BYTES),))
            if row is not None:
                self._backend.key = None
                return KeyInfo(row[0], key_id(bytes(row[1])), row[2])
        raise StoreError(f"PostgreSQL store {self.location}: could not add a key")

    def retire_key(self, number: int) -> bool:
        row = self._one("DELETE FROM lobster_keys WHERE id = %s"
                        " AND id < (SELECT max(id) FROM lobster_keys) RETURNING 1", (number,))
        return row is not None

    def count_checkpoints(self) -> int:
        row = self._one("SELECT count(*) FROM lobster_frames")
        return int(row[0]) if row else 0

    # programs ------------------------------------------------------------------------------
    def save_program(self, program_hash: str, encode: Callable[[], bytes],
                     intact: Callable[[bytes], bool] | None = None) -> None:
        """One round trip when the program is stored and intact: it is touched, and its bytes
        come back to be checked, in one statement."""
        row = self._lazy("UPDATE lobster_programs SET used_at = now() FROM lazy"
                         f" WHERE hash = %s RETURNING {'body' if intact else '1'}",
                         (program_hash,))
        if row is None or (intact is not None and not intact(bytes(row[0]))):
            self._save_program(program_hash, encode())

    def _save_program(self, program_hash: str, body: bytes) -> None:
        self._lazy("INSERT INTO lobster_programs (hash, body) SELECT %s, %s FROM lazy"
                   " ON CONFLICT (hash) DO UPDATE SET body = excluded.body, used_at = now()",
                   (program_hash, body))

    def load_program_bytes(self, program_hash: str) -> bytes | None:
        row = self._one("SELECT body FROM lobster_programs WHERE hash = %s", (program_hash,))
        return None if row is None else bytes(row[0])

    def list_programs(self) -> list[tuple[str, float]]:
        with self._connection() as conn:
            rows = conn.execute("SELECT hash, extract(epoch FROM used_at)::float8"
                                " FROM lobster_programs ORDER BY hash").fetchall()
        return [(h, at) for h, at in rows]

    def remove_program(self, program_hash: str, unused_since: float) -> bool:
        row = self._one("DELETE FROM lobster_programs WHERE hash = %s"
                        " AND used_at < to_timestamp(%s) RETURNING 1",
                        (program_hash, unused_since))
        return row is not None

    # frames and claims ---------------------------------------------------------------------
    # a frame parked (again) under its key: unclaimed, with its expiry and MAC
    _FRAME_OVER = (" ON CONFLICT (state_key) DO UPDATE SET body = excluded.body,"
                   " created_at = now(), claimed_at = NULL, claimant = NULL,"
                   " lease_until = NULL, expires_at = excluded.expires_at, mac = excluded.mac")
    _SAVE_FRAME = ("INSERT INTO lobster_frames (state_key, body, expires_at, mac)"
                   " VALUES (%s, %s, to_timestamp(%s), %s)" + _FRAME_OVER)

    def save_frame(self, state_key: str, blob: bytes, expires_at: float | None = None,
                   key: bytes | None = None) -> None:
        mac = frame_mac(key or self.key(), state_key, blob)
        self._one(self._SAVE_FRAME + " RETURNING 1", (state_key, blob, expires_at, mac))

    # The program of a park. A stored row is updated, and so locked until the park commits,
    # only when its bytes differ (damaged: mended) or its used_at is program_touch_s old: parks
    # of one program from many processes commit side by side, where an upsert that always
    # updated made each wait for the previous one's durable commit. The update comes first and
    # the insert only when it updated nothing: a stale row that gc deletes meanwhile is either
    # locked by the update first (gc's DELETE then waits, and finds it fresh) or found gone
    # (and inserted again); a fresh row is one gc never deletes (it widens its window by
    # program_touch_s). An INSERT ... DO NOTHING takes no lock on a committed row.
    _SAVE_PROGRAM = ("given (hash, body, touch_s) AS (VALUES (%s::text, %s::bytea, %s::float8)),"
                     " touched AS (UPDATE lobster_programs p SET used_at = now(),"
                     " body = CASE WHEN p.body = g.body THEN p.body ELSE g.body END"
                     " FROM given g WHERE p.hash = g.hash AND (p.body <> g.body"
                     " OR p.used_at < now() - make_interval(secs => g.touch_s)) RETURNING 1),"
                     " program AS (INSERT INTO lobster_programs (hash, body) SELECT hash, body"
                     " FROM given WHERE NOT EXISTS (SELECT 1 FROM touched)"
                     " ON CONFLICT (hash) DO NOTHING RETURNING 1)")

    def park(self, state_key: str, blob: bytes, expires_at: float | None, key: bytes,
             program_hash: str, encode: Callable[[], bytes],
             approval_id: str | None = None) -> None:
        """The program, the approval id (if given: drawn by new_approval_id(deferred=True))
        and the frame in one statement (one round trip, one durable commit). The program is
        sent each time: a stored one is touched at most once a program_touch_s, its bytes kept
        when they are the same (a damaged one is replaced, as `save_program` does). An approval
        id another checkpoint has parks nothing: ApprovalIdTaken."""
        mac = frame_mac(key, state_key, blob)
        self._drawn.discard(approval_id)
        if approval_id is None:
            self._one(f"WITH {self._SAVE_PROGRAM} " + self._SAVE_FRAME
                      + " RETURNING (SELECT count(*) FROM program)",
                      (program_hash, encode(), self.program_touch_s, state_key, blob,
                       expires_at, mac))
            return
        # an id this checkpoint has already (published by new_approval_id) passes too
        row = self._one("WITH approval AS (INSERT INTO lobster_approvals AS a"
                        " (approval_id, state_key) VALUES (%s, %s) ON CONFLICT (approval_id)"
                        " DO UPDATE SET state_key = a.state_key"
                        " WHERE a.state_key = excluded.state_key"
                        f" RETURNING 1), {self._SAVE_PROGRAM}"
                        " INSERT INTO lobster_frames (state_key, body, expires_at, mac)"
                        " SELECT %s, %s, to_timestamp(%s), %s FROM approval"
                        + self._FRAME_OVER + " RETURNING (SELECT count(*) FROM program)",
                        (approval_id, state_key, program_hash, encode(), self.program_touch_s,
                         state_key, blob, expires_at, mac))
        if row is None:
            raise ApprovalIdTaken(f"the approval id {approval_id} is another checkpoint's")

    def read_frame(self, state_key: str) -> bytes | None:
        row = self._one("SELECT body FROM lobster_frames"
                        " WHERE state_key = %s AND claimed_at IS NULL", (state_key,))
        return None if row is None else bytes(row[0])

    _PARKED = ("SELECT state_key, body, extract(epoch FROM created_at)::float8,"
               " extract(epoch FROM expires_at)::float8, mac FROM lobster_frames"
               " WHERE claimed_at IS NULL")

    def read_parked(self, state_key: str) -> Parked | None:
        """The frame, and in the same round trip the key set, kept for the verification_keys
        call that follows (see there)."""
        row = self._one("SELECT f.*, (SELECT array_agg(key ORDER BY id DESC) FROM lobster_keys)"
                        f" FROM ({self._PARKED} AND state_key = %s) f", (state_key,))
        if row is None:
            return None
        keys = row[-1] or []
        self._read_keys = [check_key(bytes(k), f"of {self.location}") for k in keys] or None
        return _parked(row[:-1])

    def list_parked(self) -> list[Parked]:
        with self._connection() as conn:
            rows = conn.execute(self._PARKED + " ORDER BY created_at, state_key").fetchall()
        return [_parked(row) for row in rows]

    def claim_frame(self, state_key: str, claimant: Claimant | None = None,
                    lease_until: float | None = None, record: bytes | None = None) -> bool:
        """One statement: of concurrent claims, the row lock lets one through and the others
        find the row gone or claimed when they recheck it. With a `record`, the same statement
        writes the checkpoint's record, so the claim never exists without it."""
        if claimant is None:
            row = self._once("DELETE FROM lobster_frames WHERE state_key = %s"
                            " AND claimed_at IS NULL RETURNING 1", (state_key,))
        elif record is None:
            row = self._once("UPDATE lobster_frames SET claimed_at = now(), claimant = %s,"
                            " lease_until = to_timestamp(%s)"
                            " WHERE state_key = %s AND claimed_at IS NULL RETURNING 1",
                            (json.dumps(claimant.to_json()), lease_until, state_key))
        else:
            row = self._once("WITH c AS (UPDATE lobster_frames SET claimed_at = now(),"
                            " claimant = %s, lease_until = to_timestamp(%s)"
                            " WHERE state_key = %s AND claimed_at IS NULL RETURNING state_key)"
                            " INSERT INTO lobster_records (state_key, state, record)"
                            " SELECT state_key, %s, %s FROM c ON CONFLICT (state_key) DO UPDATE"
                            " SET state = excluded.state, record = excluded.record,"
                            " updated_at = now() RETURNING 1",
                            (json.dumps(claimant.to_json()), lease_until, state_key,
                             _record_state(record), record.decode("utf-8")))
        return row is not None

    def claim_checkpoint(self, state_key: str, claimant: Claimant, lease_until: float,
                         record: dict) -> dict | None:
        """One statement: the claim, and the record written with it, its events appended to
        those of a record already there (in SQL, so no round trip reads it first)."""
        row = self._once("WITH c AS (UPDATE lobster_frames SET claimed_at = now(),"
                         " claimant = %s, lease_until = to_timestamp(%s),"
                         " generation = generation + 1"
                         " WHERE state_key = %s AND claimed_at IS NULL"
                         " RETURNING state_key, generation)"
                         " INSERT INTO lobster_records AS r (state_key, state, record)"
                         " SELECT state_key, %s, %s::jsonb FROM c ON CONFLICT (state_key)"
                         " DO UPDATE SET state = excluded.state, updated_at = now(),"
                         " record = jsonb_set(excluded.record, '{events}', CASE"
                         " WHEN jsonb_typeof(r.record->'events') = 'array'"
                         " THEN r.record->'events' ELSE '[]'::jsonb END"
                         " || (excluded.record->'events'))"
                         " RETURNING record::text, (SELECT generation FROM c)",
                         (json.dumps(claimant.to_json()), lease_until, state_key,
                          str(record.get("state", "")), json.dumps(record)))
        return None if row is None else (json.loads(row[0]), row[1])

    def renew_claim(self, state_key: str, lease_until: float, fence: Any = None) -> bool:
        """Extend the lease; with `fence` (claim_checkpoint's generation) only while the
        claim is that one."""
        fenced, run = ("", self._lazy) if fence is None else (" AND generation = %s", self._one)
        return run("UPDATE lobster_frames SET lease_until = to_timestamp(%s)"
                   + (" FROM lazy" if fence is None else "") + " WHERE state_key = %s AND"
                   f" claimed_at IS NOT NULL{fenced} RETURNING 1",
                   (lease_until, state_key) + (() if fence is None else (fence,))) is not None


    def repark(self, state_key: str, blob: bytes, expires_at: float | None,
               key: bytes | None = None) -> None:
        # the claim is the frame's row: writing the new frame over it ends the claim at once
        self.save_frame(state_key, blob, expires_at, key=key)

    def finish_claim(self, state_key: str) -> None:
        self._lazy("DELETE FROM lobster_frames USING lazy"
                   " WHERE state_key = %s AND claimed_at IS NOT NULL", (state_key,))

    _CLAIMS = ("SELECT state_key, extract(epoch FROM claimed_at)::float8, claimant::text,"
               " extract(epoch FROM lease_until)::float8 FROM lobster_frames"
               " WHERE claimed_at IS NOT NULL")

    def in_doubt(self) -> list[ClaimRecord]:
        with self._connection() as conn:
            rows = conn.execute(self._CLAIMS + " ORDER BY claimed_at, state_key").fetchall()
        return [_claim(row) for row in rows]

    def claim_record(self, state_key: str) -> ClaimRecord | None:
        row = self._one(self._CLAIMS + " AND state_key = %s", (state_key,))
        return None if row is None else _claim(row)

    # checkpoint records (vm/host/store/lifecycle.py writes them) ---------------------------------
    _UPSERT_RECORD = ("INSERT INTO lobster_records (state_key, state, record) SELECT %s, %s, %s"
                      " {source} ON CONFLICT (state_key) DO UPDATE SET state = excluded.state,"
                      " record = excluded.record, updated_at = now()")

    def write_record(self, state_key: str, record: bytes, durable: bool = True) -> None:
        params = (state_key, _record_state(record), record.decode("utf-8"))
        if durable:
            self._one(self._UPSERT_RECORD.format(source="") + " RETURNING 1", params)
        else:
            self._lazy(self._UPSERT_RECORD.format(source="FROM lazy"), params)

    def settle_claim(self, state_key: str, record: bytes, durable: bool = True,
                     fence: Any = None) -> bool:
        """One statement: the record written, the claimed frame removed; with `fence`, only
        while the claim is that generation (else False, nothing written)."""
        params = (state_key, state_key, _record_state(record), record.decode("utf-8"))
        if fence is not None:
            return self._one("WITH d AS (DELETE FROM lobster_frames WHERE state_key = %s AND"
                             " claimed_at IS NOT NULL AND generation = %s RETURNING 1) "
                             + self._UPSERT_RECORD.format(source="FROM d") + " RETURNING 1",
                             (state_key, fence, *params[1:])) is not None
        drop = ("d AS (DELETE FROM lobster_frames WHERE state_key = %s"
                " AND claimed_at IS NOT NULL)")
        if durable:
            self._one(f"WITH {drop} " + self._UPSERT_RECORD.format(source="") + " RETURNING 1",
                      params)
        else:  # run again on a fresh connection if this one broke: both steps are idempotent
            self._one(f"WITH lazy AS ({_LAZY}), {drop} "
                      + self._UPSERT_RECORD.format(source="FROM lazy"), params)
        return True

    def read_record(self, state_key: str) -> bytes | None:
        row = self._one("SELECT record::text FROM lobster_records WHERE state_key = %s",
                        (state_key,))
        return None if row is None else row[0].encode("utf-8")

    def list_records(self, ended: bool = True) -> list[tuple[str, bytes]]:
        where = "" if ended else " WHERE state NOT IN ('finished', 'cancelled', 'expired')"
        with self._connection() as conn:
            rows = conn.execute("SELECT state_key, record::text FROM lobster_records" + where
                                + " ORDER BY state_key").fetchall()
        return [(key, text.encode("utf-8")) for key, text in rows]

    def remove_record(self, state_key: str) -> None:
        self._lazy("DELETE FROM lobster_records USING lazy WHERE state_key = %s", (state_key,))

    # approval ids --------------------------------------------------------------------------
    def new_approval_id(self, state_key: str, deferred: bool = False) -> str | None:
        if deferred:  # published by the park it is given to, in the same statement
            approval_id = secrets.token_hex(4)
            self._drawn.add(approval_id)
            return approval_id
        for _ in range(16):
            approval_id = secrets.token_hex(4)
            row = self._lazy("INSERT INTO lobster_approvals (approval_id, state_key)"
                             " SELECT %s, %s FROM lazy ON CONFLICT DO NOTHING RETURNING 1",
                             (approval_id, state_key))
            if row is not None:
                return approval_id
        return None

    def lookup_approval_id(self, approval_id: str) -> str | None:
        approval_id = approval_id_form(approval_id)
        if approval_id is None:
            return None
        row = self._one("SELECT state_key FROM lobster_approvals WHERE approval_id = %s",
                        (approval_id,))
        key = None if row is None else row[0]
        return key if isinstance(key, str) and STATE_KEY.fullmatch(key) else None

    def remove_approval_id(self, approval_id: str | None) -> None:
        if approval_id in self._drawn:  # drawn, never published: it may be another's
            self._drawn.discard(approval_id)
        elif approval_id:
            self._lazy("DELETE FROM lobster_approvals USING lazy WHERE approval_id = %s",
                       (approval_id,))

    # state.* values ------------------------------------------------------------------------
    def get_value(self, key: str, default: Any = None, strict: bool = False) -> Any:
        row = self._one("SELECT value FROM lobster_values WHERE key = %s", (value_name(key),))
        if row is None:
            return default
        try:
            # JSON.parse's reading and words, as the directory's
            return json_read.json_loads(row[0])
        except ValueError as exc:
            if strict:
                raise StoreError(str(exc)) from None
            return default

    def set_value(self, key: str, value: Any) -> None:
        text = value_json(value)
        self._one("INSERT INTO lobster_values (key, value) VALUES (%s, %s)"
                  " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()"
                  " RETURNING 1", (value_name(key), text))

    # cache entries -------------------------------------------------------------------------
    def get_cache(self, kind: str, key: str) -> bytes | None:
        row = self._one("SELECT value FROM lobster_cache WHERE kind = %s AND key = %s",
                        cache_name(kind, key))
        return None if row is None else bytes(row[0])

    def put_cache(self, kind: str, key: str, blob: bytes) -> None:
        self._lazy("INSERT INTO lobster_cache (kind, key, value) SELECT %s, %s, %s FROM lazy"
                   " ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value,"
                   " created_at = now()", (*cache_name(kind, key), blob))

    def list_cache(self) -> list[CacheEntry]:
        with self._connection() as conn:
            rows = conn.execute("SELECT kind, key, extract(epoch FROM created_at)::float8"
                                " FROM lobster_cache ORDER BY kind, key").fetchall()
        return [CacheEntry(kind, key, at) for kind, key, at in rows]

    def remove_cache(self, kind: str, key: str) -> None:
        self._lazy("DELETE FROM lobster_cache USING lazy WHERE kind = %s AND key = %s",
                   cache_name(kind, key))

    # what interrupted writes leave -----------------------------------------------------------
    _ORPHAN = ("NOT EXISTS (SELECT 1 FROM lobster_frames f"
               " WHERE f.state_key = lobster_approvals.state_key)"
               " AND NOT EXISTS (SELECT 1 FROM lobster_records r"
               " WHERE r.state_key = lobster_approvals.state_key)")

    def leftovers(self, older_than: float) -> list[str]:
        """Approval ids whose frame was never written or is gone (a statement is all or
        nothing here: no temporary rows)."""
        with self._connection() as conn:
            rows = conn.execute("SELECT approval_id FROM lobster_approvals WHERE " + self._ORPHAN
                                + " AND created_at < to_timestamp(%s) ORDER BY approval_id",
                                (older_than,)).fetchall()
        return [f"approval:{r[0]}" for r in rows]

    def remove_leftover(self, name: str) -> bool:
        kind, _, approval_id = name.partition(":")
        if kind != "approval":
            return False
        row = self._one("DELETE FROM lobster_approvals WHERE approval_id = %s AND "
                        + self._ORPHAN + " RETURNING 1", (approval_id,))
        return row is not None


def _parked(row: tuple) -> Parked:
    key, body, created_at, expires_at, mac = row
    return Parked(key, bytes(body), created_at, expires_at, None if mac is None else bytes(mac))


def _claim(row: tuple) -> ClaimRecord:
    key, at, claimant, lease_until = row
    return ClaimRecord(key, at, Claimant.from_json(_json_or_none(claimant)), lease_until)


def _record_state(record: bytes) -> str:
    try:
        return str(json.loads(record).get("state", ""))
    except (ValueError, AttributeError):
        return ""


def _json_or_none(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
