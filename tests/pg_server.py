"""A PostgreSQL server for the store tests: LOBSTER_TEST_POSTGRES names one, or a throwaway
cluster is made (initdb into a temporary folder, a unix socket there, stopped at the end).

    python tests/pg_server.py start DIR [--durable]   prints the server's URL
    python tests/pg_server.py stop DIR
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

REQUIRED = "LOBSTER_TEST_POSTGRES_REQUIRED"


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return candidates[-1] if candidates else None


def _as_owner(argv: list[str], owner: str | None) -> list[str]:
    return ["runuser", "-u", owner, "--", *argv] if owner else argv


def _owner() -> str | None:
    """The unprivileged user the server runs as when we are root (postgres refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root, and no postgres or nobody user to run the server as")


def start(directory: str, durable: bool = False) -> str:
    """Make a cluster in `directory` and start it on a unix socket there; returns its URL."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL is not installed (no initdb / pg_ctl found)")
    owner = _owner()
    os.makedirs(directory, exist_ok=True)
    if owner:
        entry = pwd.getpwnam(owner)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    data = os.path.join(directory, "data")
    run = dict(check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
               cwd=directory)
    subprocess.run(_as_owner([initdb, "-D", data, "-A", "trust", "-U", "lobster", "-E", "UTF8",
                              "--no-instructions", *([] if durable else ["--no-sync"])], owner),
                   **run)
    settings = ["-c listen_addresses=''", f"-k {directory}", "-c max_connections=100"]
    if not durable:
        settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
    subprocess.run(_as_owner([pg_ctl, "-D", data, "-l", os.path.join(directory, "log"), "-w",
                              "-t", "60", "-o", " ".join(settings), "start"], owner), **run)
    return f"postgresql://lobster@/postgres?host={directory}"


def stop(directory: str) -> None:
    pg_ctl = _bin("pg_ctl")
    data = os.path.join(directory, "data")
    if pg_ctl and os.path.isdir(data):
        subprocess.run(_as_owner([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], _owner()),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    shutil.rmtree(directory, ignore_errors=True)


def _unavailable(reason: str):
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"PostgreSQL store tests cannot run ({REQUIRED}=1): {reason}")
    pytest.skip(f"no PostgreSQL server for the store tests: {reason}")


@pytest.fixture(scope="session")
def pg_server():
    """The URL of a PostgreSQL server (skips, or fails where it is required, without one)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install '.[postgres]')")
    configured = (os.environ.get("LOBSTER_TEST_POSTGRES") or "").strip()
    if configured:
        yield configured
        return
    directory = tempfile.mkdtemp(prefix="lobster-pg-")
    try:
        url = start(directory)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        stop(directory)
        detail = getattr(exc, "stdout", None) or ""
        _unavailable(f"{exc} {detail.strip()[-400:]}".strip())
    try:
        yield url
    finally:
        from vm.host.store.postgres_pool import close_pools

        close_pools()
        stop(directory)


def with_search_path(url: str, schema: str) -> str:
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_url(pg_server):
    """A URL whose tables live in a fresh schema of their own, dropped afterwards."""
    import psycopg

    from vm.host.store.postgres_pool import close_pools

    schema = f"lobster_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(pg_server, schema)
    finally:
        close_pools()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    command, where = sys.argv[1], sys.argv[2]
    if command == "start":
        print(start(where, durable="--durable" in sys.argv[3:]))
    else:
        stop(where)


@pytest.fixture(params=["directory", "postgres"])
def location(request, tmp_path) -> str:
    """A store location for each backend: a state dir, then a PostgreSQL URL."""
    if request.param == "directory":
        return str(tmp_path / "state")
    return request.getfixturevalue("pg_url")
