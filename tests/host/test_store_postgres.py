"""The PostgreSQL store's own parts: its schema and migrations, its pool, its messages."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
from pg_server import pg_server, pg_url  # noqa: F401  (fixtures)

from vm.host.store import StoreError, open_store

psycopg = pytest.importorskip("psycopg")


def _search_path_tables(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() ORDER BY 1")]
        versions = [r[0] for r in conn.execute("SELECT version FROM lobster_meta ORDER BY 1")]
    return {"tables": names, "versions": versions}


def test_the_store_creates_its_schema_once_and_records_the_version(pg_url):
    from vm.host.store.postgres_pool import close_pools
    from vm.host.store.postgres_schema import SCHEMA_VERSION

    open_store(pg_url, {}).set_value("a", 1)
    close_pools()
    assert open_store(pg_url, {}).get_value("a") == 1  # a second open migrates nothing
    seen = _search_path_tables(pg_url)
    assert seen["versions"] == list(range(1, SCHEMA_VERSION + 1))
    assert seen["tables"] == ["lobster_approvals", "lobster_cache", "lobster_frames",
                              "lobster_keys", "lobster_meta", "lobster_programs", "lobster_records",
                              "lobster_values"]


def _open_and_write(url: str, n: int, barrier, results) -> None:
    barrier.wait()
    store = open_store(url, {})
    store.set_value(f"v{n}", n)
    results.put(n)


def test_processes_opening_a_new_database_at_once_migrate_it_once(pg_url):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(6), context.Queue()
    children = [context.Process(target=_open_and_write, args=(pg_url, n, barrier, results))
                for n in range(6)]
    for child in children:
        child.start()
    assert sorted(results.get(timeout=120) for _ in children) == list(range(6))
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    from vm.host.store.postgres_schema import SCHEMA_VERSION

    assert _search_path_tables(pg_url)["versions"] == list(range(1, SCHEMA_VERSION + 1))


def test_a_schema_newer_than_this_lobster_is_refused(pg_url):
    from vm.host.store.postgres_pool import close_pools

    open_store(pg_url, {})
    close_pools()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO lobster_meta (version) VALUES (99)")
    with pytest.raises(StoreError, match="schema is version 99, newer"):
        open_store(pg_url, {})


def test_an_unreachable_server_is_a_store_error_without_the_password(tmp_path):
    url = f"postgresql://someone:secret@/nodb?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StoreError) as caught:
        open_store(url, {})
    message = str(caught.value)
    assert "secret" not in message and "PostgreSQL store postgresql://someone@" in message
    assert "\n" not in message


def test_stores_of_one_url_share_one_pool_and_key(pg_url):
    first, second = open_store(pg_url, {}), open_store(pg_url, {})
    assert first._backend is second._backend
    assert first.key() == second.existing_key()
    assert first.location == pg_url  # no password in it to hide


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


def test_the_driver_is_imported_only_when_a_postgresql_store_is_opened():
    proc = _python("import sys, vm.service.protocol, vm.host.store; "
                   "vm.host.store.open_store('/tmp/x', {});"
                   "print(sorted(m for m in sys.modules if m.startswith('psycopg')))")
    assert proc.stdout.strip() == "[]", proc.stderr


def test_without_the_driver_a_postgresql_url_is_a_store_error_naming_the_extra():
    proc = _python("import sys; sys.modules['psycopg'] = None\n"
                   "from vm.host.store import StoreError, open_store\n"
                   "try:\n    open_store('postgresql://localhost/x', {})\n"
                   "except StoreError as exc:\n    print(exc)")
    assert proc.stdout.strip() == (
        "the PostgreSQL store needs psycopg: pip install 'lobster-pipelines[postgres]' "
        "(from a checkout: pip install '.[postgres]')"), proc.stderr


def test_a_damaged_value_is_reported_in_json_parse_words(pg_url):
    store = open_store(pg_url, {})
    store.set_value("damaged", [1])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE lobster_values SET value = %s WHERE key = %s", ('{"a":', "damaged"))
    with pytest.raises(StoreError, match="^Unexpected end of JSON input$"):
        store.get_value("damaged", strict=True)
    assert store.get_value("damaged", "d") == "d"  # diff.last starts over
