"""The PostgreSQL store's schema: `MIGRATIONS`, applied by `migrate` under an advisory lock, each
step recorded in lobster_meta. Tables live in the first schema of the connection's search_path.

  lobster_meta(version)                         one row per migration step applied
  lobster_keys(id, key, created_at)             the signing key set: the highest id signs,
                                                every row verifies; id 1 is made by the first
                                                insert (none while frames exist), each
                                                rotation adds max(id) + 1; gc retires old ones
  lobster_programs(hash, body, used_at)         compiled programs (msgpack); used_at: last saved
  lobster_frames(state_key, body, created_at,   parked frames; claimed by a DELETE (no claimant)
                 claimed_at, claimant,          or an UPDATE setting claimed_at (a claim record);
                 expires_at, mac,               expires_at: NULL, never; mac: base.frame_mac
                 lease_until, generation)       lease_until: the claim's lease, renewed as it runs;
                                                generation: the fencing token, +1 a claim
  lobster_records(state_key, state, record,     a claimed checkpoint's record (its state and
                  updated_at)                   history, JSON); a tombstone after it ends
  lobster_approvals(approval_id, state_key)     approval id -> state key
  lobster_values(key, value)                    state.* values (JSON text, key normalised)
  lobster_cache(kind, key, value, created_at)   cache entries (hints)
"""

from __future__ import annotations

from typing import Any

from vm.host.store.base import StoreError

try:
    import psycopg
except ImportError:  # the optional extra is not installed (nothing here runs then)
    psycopg = None  # type: ignore[assignment]

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1
        "CREATE TABLE lobster_key (id smallint PRIMARY KEY CHECK (id = 1), key bytea NOT NULL)",
        "CREATE TABLE lobster_programs (hash text PRIMARY KEY, body bytea NOT NULL)",
        "CREATE TABLE lobster_frames (state_key text PRIMARY KEY, body bytea NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now(), claimed_at timestamptz, claimant jsonb)",
        "CREATE INDEX lobster_frames_claimed ON lobster_frames (claimed_at)"
        " WHERE claimed_at IS NOT NULL",
        "CREATE TABLE lobster_approvals (approval_id text PRIMARY KEY, state_key text NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE lobster_values (key text PRIMARY KEY, value text NOT NULL,"
        " updated_at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE lobster_cache (kind text NOT NULL, key text NOT NULL, value bytea NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kind, key))",
    ),
    (  # 2: checkpoint expiry; when a program was last saved (for gc)
        "ALTER TABLE lobster_frames ADD COLUMN expires_at timestamptz",
        "ALTER TABLE lobster_programs ADD COLUMN used_at timestamptz NOT NULL DEFAULT now()",
    ),
    (  # 3: each frame's MAC (base.frame_mac); NULL: written before, never authentic
        "ALTER TABLE lobster_frames ADD COLUMN mac bytea",
    ),
    (  # 4: a key set (rotation) instead of one key; the key of version 3 is key 1
        "CREATE TABLE lobster_keys (id integer PRIMARY KEY CHECK (id >= 1), key bytea NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now())",
        "INSERT INTO lobster_keys (id, key) SELECT 1, key FROM lobster_key",
        "DROP TABLE lobster_key",
    ),
    (  # 5: a claim's lease, and each claimed checkpoint's record (vm/host/store/lifecycle.py)
        "ALTER TABLE lobster_frames ADD COLUMN lease_until timestamptz",
        "CREATE TABLE lobster_records (state_key text PRIMARY KEY, state text NOT NULL,"
        " record jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
    ),
    (  # 6: a claim's fencing token, incremented by every claim (lifecycle.Claim.check)
        "ALTER TABLE lobster_frames ADD COLUMN generation bigint NOT NULL DEFAULT 0",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
_MIGRATION_LOCK = 0x6C6F6273746572  # "lobster"


def migrate(conn: Any) -> None:
    """Bring the schema of `conn`'s database up to SCHEMA_VERSION (a StoreError when it is
    newer than this lobster knows)."""
    try:
        version = conn.execute("SELECT max(version) FROM lobster_meta").fetchone()[0] or 0
    except psycopg.errors.UndefinedTable:
        version = 0
    if version == SCHEMA_VERSION:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS lobster_meta (version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        version = conn.execute("SELECT max(version) FROM lobster_meta").fetchone()[0] or 0
        if version > SCHEMA_VERSION:
            raise StoreError(f"the store's schema is version {version}, newer than this "
                             f"lobster knows ({SCHEMA_VERSION})")
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute("INSERT INTO lobster_meta (version) VALUES (%s)", (step + 1,))
