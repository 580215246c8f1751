"""A cycle (run to a halt, resume to the end) costs the same however many checkpoints wait in
the store: it lists no directory of checkpoints and opens as many files with 10 as with hundreds
waiting (the state directory), and every statement it runs finds its rows by an index
(PostgreSQL: EXPLAIN with sequential scans disabled shows none). Counted, never timed."""

from __future__ import annotations

import os
import sys
import time

import pytest
from pg_server import pg_server, pg_url  # noqa: F401  (fixtures)

from vm.host.store import directory_keys, files, open_store
from vm.service.protocol import Decision, Options, handle, resume

PIPELINE = "exec --json --shell 'echo [1]' | approve --prompt ok | pick x"
_WATCHED = {"os.scandir": "listings", "os.listdir": "listings", "open": "opens"}
_COUNTS: dict[str, int] = {}
_RECORDING = [False]


def _audit(event: str, args: tuple) -> None:
    if _RECORDING[0] and event in _WATCHED:
        if event == "open" and not str(args[0]).endswith((".py", ".pyc")):
            _COUNTS["opens"] += 1
        elif event != "open":
            _COUNTS["listings"] += 1
            if os.path.basename(os.fspath(args[0] or ".")) == "runs":
                _COUNTS["runs listed"] += 1


sys.addaudithook(_audit)  # permanent once added: it counts only while a test asks it to


def _fill(location: str, count: int) -> None:
    """`count` more checkpoints waiting, written through the store (the directory's syncs
    skipped: their durability is not what is measured here)."""
    store = open_store(location, {})
    key = store.key()
    synced, files.fsync_fd = files.fsync_fd, lambda fd, path: None
    try:
        for index in range(count):
            state_key = f"pipeline_resume_fill{time.monotonic_ns()}_{index}"
            store.new_approval_id(state_key)
            store.save_frame(state_key, b"\x80", expires_at=time.time() + 3600, key=key)
    finally:
        files.fsync_fd = synced


def _cycle(options: Options) -> None:
    halted = handle({"action": "run", "pipeline": PIPELINE}, options)
    approval = halted["requiresApproval"]
    done = resume(options, Decision(approve=True), approval_id=approval["approvalId"])
    assert done["status"] == "ok", done


def _counted_cycle(options: Options) -> dict[str, int]:
    _COUNTS.update({"listings": 0, "opens": 0, "runs listed": 0})
    _RECORDING[0] = True
    try:
        _cycle(options)
    finally:
        _RECORDING[0] = False
    return dict(_COUNTS)


def test_a_directory_store_cycle_never_lists_its_checkpoints_with_10_or_400_waiting(
        tmp_path, monkeypatch):
    # the key set is kept from the first read on: with the default, a key file younger than
    # RACY_SECONDS is read again at every request, and whether the first counted cycle came
    # within two seconds of the key's making (a listing of keys/ and two opens more) was the
    # machine's speed
    monkeypatch.setattr(directory_keys, "RACY_SECONDS", 0.0)
    location = str(tmp_path / "state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    options = Options(cwd=str(tmp_path), state_dir=location, env=env)
    _fill(location, 10)
    for _ in range(2):  # warm: the program stored, the compile cached and memoised
        _cycle(options)
    few = _counted_cycle(options)
    _fill(location, 390)
    many = _counted_cycle(options)
    assert few["runs listed"] == many["runs listed"] == 0
    assert few == many  # the same files opened, the same (small) directories listed (keys/)


def test_a_postgres_cycle_finds_every_row_by_an_index(pg_url, tmp_path, monkeypatch):
    import psycopg

    statements: list[tuple[str, tuple]] = []
    execute = psycopg.Connection.execute

    def recorded(self, query, params=None, **kwargs):
        statements.append((str(query), params))
        return execute(self, query, params, **kwargs)

    options = Options(cwd=str(tmp_path), state_dir=pg_url, env={"PATH": os.environ["PATH"]})
    _fill(pg_url, 10)
    for _ in range(2):
        _cycle(options)
    monkeypatch.setattr(psycopg.Connection, "execute", recorded)
    _cycle(options)
    few = len(statements)
    _fill(pg_url, 390)
    statements.clear()
    _cycle(options)
    monkeypatch.undo()
    assert len(statements) == few, statements
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # a scan of a whole table shows up as one
        for query, params in statements:
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + query, params))
            scanned = {line.split(" on ")[1].split()[0] for line in plan.splitlines()
                       if "Seq Scan on " in line}
            # the key set is read whole on purpose: a handful of rows, whatever waits
            assert scanned <= {"lobster_keys"}, (query, plan)


@pytest.mark.parametrize("waiting", [0, 3])
def test_the_fill_helper_leaves_that_many_checkpoints_waiting(tmp_path, waiting):
    location = str(tmp_path / "state")
    _fill(location, waiting)
    assert len(open_store(location, {}).list_parked()) == waiting
