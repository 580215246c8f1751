"""Connections to PostgreSQL stores: one pool per URL per process (psycopg 3), shared by every
store of that URL with its cached signing key, and the statement runner the stores use.

A pooled connection is checked as it is taken from the pool, without a round trip: one whose
socket has input while idle (a server that shut down or restarted sends its last words and
closes) is closed and replaced. A statement that still fails because its connection broke has
the pool test its idle connections (one round trip each, on this path only) and is run once
more, unless the caller says it must never run twice.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from vm.core.distribution import install_hint
from vm.host.store.base import StoreError
from vm.host.store.postgres_schema import migrate

try:
    import psycopg
    import psycopg_pool
except ImportError:  # the optional extra is not installed
    psycopg = None  # type: ignore[assignment]
else:
    _IDLE = psycopg.pq.TransactionStatus.IDLE

POOL_MAX = 8
HELD_S = 60.0  # the connection kept between statements goes back to the pool after this
POOL_TIMEOUT = 10.0  # seconds to wait for a free connection
CONNECT_TIMEOUT = 10  # seconds


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url.split("://", 1)[0] + "://(unreadable URL)"
    netloc = parts.netloc
    if password is not None:
        netloc = netloc.rsplit("@", 1)[1]
        netloc = f"{parts.username}@{netloc}" if parts.username else netloc
    query = "&".join(p for p in parts.query.split("&") if not p.startswith("password="))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Backend:
    """What every store of one URL shares in this process: the pool and the signing key."""

    def __init__(self, url: str) -> None:
        self.location = redacted(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                migrate(conn)  # connecting first gives a bad URL its libpq message at once
        except psycopg.Error as exc:
            raise store_error(self.location, exc) from None
        self.pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=POOL_MAX, timeout=POOL_TIMEOUT, open=True,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT,
                    "prepare_threshold": 0},  # a fixed set of statements: prepare each at once
            name=f"lobster-store-{os.getpid()}")
        self.key: tuple[bytes, float] | None = None  # the signing key, when it was read
        self.statements = 0  # run through `run` and `connection`: a test counts round trips
        # The connection the last statement ran on, kept out of the pool for the next one:
        # taking one from the pool and giving it back was a tenth of a cycle's time in Python.
        # One at a time (other threads use the pool, and it is not kept while one waits for
        # a connection); it goes back to the pool at its first use HELD_S after it left it, so
        # the pool's lifetime limit still renews it (an idle process keeps it open, as the
        # pool's minimum of one connection would be).
        self._held: Any = None
        self._held_lock = threading.Lock()
        self._taking = 0  # threads in getconn now (under _held_lock): none is kept then

    def getconn(self) -> Any:
        """The connection kept from the last statement, else a pooled one, either not stale:
        each stale one is closed, so that the pool discards it (the pool's own check would
        back off for seconds between them)."""
        with self._held_lock:  # one step: a putconn now either left one here or sees us
            held, self._held = self._held, None
            self._taking += 1
        try:
            if held is not None:
                if not _stale(held) and not self.pool.closed:
                    return held
                held.close()
                self.pool.putconn(held)  # discarded there (a closed pool says so)
            conn = self._from_pool()
        finally:
            with self._held_lock:
                self._taking -= 1
        conn._lobster_taken = time.monotonic()
        return conn

    def _from_pool(self) -> Any:
        pool = self.pool
        for _ in range(POOL_MAX):
            conn = pool.getconn()
            if not _stale(conn):
                return conn
            conn.close()
            pool.putconn(conn)
        return pool.getconn()

    def _take_held(self) -> Any:
        with self._held_lock:
            held, self._held = self._held, None
        return held

    def putconn(self, conn: Any) -> None:
        """Done with `conn`: kept for the next statement when it is sound, idle (no transaction
        open), left the pool less than HELD_S ago, none is kept yet, the pool is open and no
        other thread is taking one from the pool (it may be waiting for this one); else back to
        the pool (which discards a broken one)."""
        pool = self.pool
        if not (conn.closed or conn.broken or pool.closed) \
                and conn.pgconn.transaction_status == _IDLE \
                and time.monotonic() - getattr(conn, "_lobster_taken", 0.0) < HELD_S:
            with self._held_lock:
                if self._held is None and not self._taking:
                    self._held = conn
                    return
        pool.putconn(conn)

    @property
    def holding(self) -> int:
        """1 while a connection is kept out of the pool between statements, else 0."""
        return int(self._held is not None)

    def release(self) -> None:
        """Give the kept connection back to the pool (before the pool closes)."""
        held = self._take_held()
        if held is not None:
            self.pool.putconn(held)

    def tested_conn(self) -> Any:
        """For a retry: a pooled connection that answered a round trip (after a restart or a
        cut, every connection the pool held may be as dead as the one that failed)."""
        pool = self.pool
        for _ in range(POOL_MAX):
            conn = self.getconn()
            try:
                conn.execute("SELECT 1")
                return conn
            except psycopg.OperationalError:
                pool.putconn(conn)  # broken: discarded there
        return self.getconn()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection for a few statements; driver errors become StoreErrors."""
        self.statements += 1
        try:
            conn = self.getconn()
            try:
                yield conn
            finally:
                self.putconn(conn)
        except psycopg.Error as exc:
            raise store_error(self.location, exc) from None

    def run(self, sql: str, params: tuple, retry: bool) -> tuple | None:
        """One statement, its first row (or None). `retry`: run it once more on a fresh
        connection when the connection broke under it (every statement but the claim)."""
        pool = self.pool
        self.statements += 1
        for attempt in (1, 2):
            try:
                conn = self.getconn() if attempt == 1 else self.tested_conn()
                try:
                    cursor = _cursor(conn)
                    cursor.execute(sql, params)
                    result = cursor.pgresult
                    return cursor.fetchone() if result is not None \
                        and result.status == psycopg.pq.ExecStatus.TUPLES_OK else None
                except psycopg.OperationalError:
                    if not (conn.broken or conn.closed):
                        raise
                    pool.check()  # its other idle connections may be as dead: test each
                    if not retry or attempt == 2:
                        raise
                finally:
                    self.putconn(conn)
            except psycopg.Error as exc:
                raise store_error(self.location, exc) from None
        return None  # not reached: the second attempt returns or raises


def _cursor(conn: Any) -> Any:
    """The cursor `run` executes its statements on: one per connection, kept with it (a
    cursor made per statement, and the column descriptions read to tell a row from none, were
    a third of a statement's time in Python)."""
    cursor = getattr(conn, "_lobster_cursor", None)
    if cursor is None or cursor.closed:
        cursor = conn._lobster_cursor = conn.cursor()
    return cursor


def _stale(conn: Any) -> bool:
    """Whether a connection just taken from the pool is unusable, without a round trip: an
    idle connection has nothing to read, so a readable socket means it was closed (or the
    server sent its parting FATAL). Its socket is polled with a poll object kept with it."""
    if conn.closed or conn.broken:
        return True
    poller = getattr(conn, "_lobster_poll", None)
    try:
        if poller is None:
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            conn._lobster_poll = poller
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


_BACKENDS: dict[tuple[int, str], Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def shared_backend(url: str) -> Backend:
    """The Backend of `url` in this process, made (connected, its schema migrated) on first
    use; a StoreError when psycopg is missing or the database cannot be reached."""
    if psycopg is None:
        raise StoreError("the PostgreSQL store needs psycopg: " + install_hint("postgres"))
    ident = (os.getpid(), url)  # a forked child opens its own pool
    found = _BACKENDS.get(ident)
    if found is None:
        with _BACKENDS_LOCK:
            found = _BACKENDS.get(ident)
            if found is None:
                found = _BACKENDS[ident] = Backend(url)
    return found


def close_pools() -> None:
    """Close every pool this process opened (an embedding host shutting down; tests)."""
    with _BACKENDS_LOCK:
        backends = [b for (pid, _), b in _BACKENDS.items() if pid == os.getpid()]
        _BACKENDS.clear()
    for each in backends:
        each.release()
        each.pool.close()


def store_error(location: str, exc: Exception) -> StoreError:
    """A driver error as a one-line StoreError naming the (redacted) store."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreError(f"PostgreSQL store {location}: {message}")
