#!/usr/bin/env python3
"""Store benchmark: halt+resume cycles per second through each store, from 1 and 4 processes.

    python bench/store_bench.py [--url postgresql://...] [--seconds S] [--processes 1,4,16]

One cycle is what a halt and its resume ask of the store: save frame + approval id, look the id
up, read the frame, claim it through the lifecycle (claim, lease and record in one step, a lease
renewer started), finish it (its record kept as a tombstone, the claimed frame removed); the
program is saved once per process. Without --url a throwaway PostgreSQL cluster is made with durable
settings (fsync on, synchronous_commit on). The "no sync" row sets synchronous_commit off for
the session, to show what the WAL flushes cost. Prints a table; asserts nothing.

bench/run.py calls the functions below (each returns a figure, prints nothing):

- `sync_probe(directory, seconds)`: durable replaces per second in `directory` (create, write,
  fsync, rename, fsync of the directory): the disk's limit a durable cycle is measured against;
- `durable_cycles(directory, seconds)`: full cycles per second (run to a halt through `handle`,
  `resume` to the end) with the state directory store in `directory`, in this process;
- `pg_cycles(url, processes, seconds)`: the same full cycles per second with the PostgreSQL
  store at `url`, from `processes` processes together;
- `flat_cost(location, pending)`: ms per full cycle with 10 and with `pending` checkpoints
  waiting in the store at `location` (the extra ones written directly, without runs).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from vm.host.store import lifecycle, open_store  # noqa: E402

FRAME = os.urandom(2048)


def _worker(location: str, seconds: float, barrier, results) -> None:
    store = open_store(location, {})
    store.save_program("bench-program", lambda: b"p" * 4096)
    store.key()
    prefix = f"pipeline_resume_{os.getpid()}_{time.monotonic_ns()}"
    barrier.wait()
    cycles, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        state_key = f"{prefix}_{cycles}"
        approval_id = store.new_approval_id(state_key)
        store.save_frame(state_key, FRAME)
        assert store.lookup_approval_id(approval_id) == state_key
        parked = store.read_parked(state_key)
        assert parked.blob == FRAME
        taken = lifecycle.claim(store, parked, None, decision="approve")
        taken.finish("ok")
        cycles += 1
    results.put(cycles)


def measure(location: str, processes: int, seconds: float) -> float:
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_worker, args=(location, seconds, barrier, results))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    total = sum(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    return total / seconds


PIPELINE = "state.get none | map --wrap v | approve --prompt ok | pick v"


def _full_cycles(location: str, seconds: float, cwd: str,
                 settle: float = 0.0) -> tuple[int, float]:
    """Full cycles through `handle` and `resume` for `seconds` (after one warm-up cycle and
    `settle` seconds of rest): how many, and the seconds they took."""
    from vm.service.protocol import Decision, Options, handle, resume

    options = Options(cwd=cwd, state_dir=location, env={"PATH": os.environ.get("PATH", "")})
    cycles, start, spent = -1, 0.0, 0.0
    while spent < seconds:
        if cycles == 0:
            time.sleep(settle)
            start = time.perf_counter()
        envelope = handle({"action": "run", "pipeline": PIPELINE}, options)
        token = envelope["requiresApproval"]["resumeToken"]
        done = resume(options, Decision(approve=True), token=token)
        assert done["status"] == "ok", done
        cycles += 1
        spent = time.perf_counter() - start if cycles else 0.0
    return cycles, spent


def sync_probe(directory: str, seconds: float) -> float:
    """Durable replaces per second in `directory`: create, write (4 KiB), fsync, rename,
    fsync of the directory: what the disk allows a durable store at most."""
    os.makedirs(directory, exist_ok=True)
    data, target = os.urandom(4096), os.path.join(directory, "probe")
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        tmp = f"{target}.{count}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        count += 1
    rate = count / (time.perf_counter() - start)
    os.unlink(target)
    return rate


def durable_cycles(directory: str, seconds: float) -> float:
    """Full cycles per second with the state directory store in `directory`, timed once its
    key (made by the warm-up cycle) is older than RACY_SECONDS: a gateway's steady state,
    where the key set is served from memory (a key file younger than that is read again on
    every request). It rests rather than cycles until then: cycles would leave the disk
    thousands of just-deleted files, which slow the timed ones (docs/benchmarks.md)."""
    from vm.host.store.directory_keys import RACY_SECONDS

    os.makedirs(directory, exist_ok=True)
    cycles, spent = _full_cycles(os.path.join(directory, "state"), seconds, directory,
                                 settle=RACY_SECONDS + 0.1)
    return cycles / spent


def _pg_worker(url: str, seconds: float, cwd: str, barrier, results) -> None:
    from vm.service.protocol import Options, handle

    handle({"action": "run", "pipeline": PIPELINE}, Options(cwd=cwd, state_dir=url, env={}))
    barrier.wait()
    results.put(_full_cycles(url, seconds, cwd))


def pg_cycles(url: str, processes: int, seconds: float) -> float:
    """Full cycles per second with the PostgreSQL store at `url`, from `processes` processes
    together (each its own pool, as a fleet of gateways)."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    with tempfile.TemporaryDirectory() as cwd:
        workers = [context.Process(target=_pg_worker, args=(url, seconds, cwd, barrier, results))
                   for _ in range(processes)]
        for worker in workers:
            worker.start()
        done = [results.get() for _ in workers]
        for worker in workers:
            worker.join()
    return sum(cycles / spent for cycles, spent in done)


def _fill(location: str, count: int) -> None:
    """Add `count` waiting checkpoints (frame, approval id) to the store directly: written
    in bulk, not synced one by one (the cycles measured afterwards sync as they always do)."""
    store = open_store(location, {})
    key = store.key()
    prefix = f"pipeline_resume_fill{time.monotonic_ns()}"
    if location.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("INSERT INTO lobster_frames (state_key, body, expires_at, mac)"
                         " SELECT %s || g, %s, now() + interval '7 days', %s"
                         " FROM generate_series(1, %s) g", (prefix, FRAME, key[:32], count))
            conn.execute("INSERT INTO lobster_approvals (approval_id, state_key)"
                         " SELECT substr(md5(%s || g), 1, 8), %s || g"
                         " FROM generate_series(1, %s) g ON CONFLICT DO NOTHING",
                         (prefix, prefix, count))
            # what autovacuum's analyze does within a minute of such a change: the plans the
            # cycles' connections cached while the tables were small (a sequential scan of a
            # page) are made again for their size. Timed before it, the first seconds after a
            # bulk insert measure those stale plans (docs/fleet.md, "Statistics")
            conn.execute("ANALYZE lobster_frames, lobster_approvals")
        return
    from vm.host.store import files

    synced = files.fsync_fd
    files.fsync_fd = lambda fd, path: None  # bulk: durability of the filler is not measured
    try:
        for index in range(count):
            state_key = f"{prefix}_{index}"
            store.new_approval_id(state_key)
            store.save_frame(state_key, FRAME, expires_at=time.time() + 7 * 86400, key=key)
    finally:
        files.fsync_fd = synced


def flat_cost(location: str, pending: int, seconds: float = 2.0) -> tuple[float, float]:
    """ms per full cycle with 10 checkpoints waiting in the store at `location` (a directory
    or a PostgreSQL URL), then with `pending` waiting."""
    figures = []
    with tempfile.TemporaryDirectory() as cwd:
        for total in (10, pending):
            _fill(location, total - (10 if figures else 0))
            cycles, spent = _full_cycles(location, seconds, cwd)
            figures.append(spent / cycles * 1000)
    return figures[0], figures[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL server (default: a throwaway durable one)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--processes", default="1,4")
    options = parser.parse_args()
    counts = [int(n) for n in options.processes.split(",")]
    server_dir = None
    url = options.url
    if url is None:
        import pg_server

        server_dir = tempfile.mkdtemp(prefix="lobster-bench-pg-")
        url = pg_server.start(server_dir, durable=True)
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            settings = {name: conn.execute(f"SHOW {name}").fetchone()[0]
                        for name in ("fsync", "synchronous_commit")}
        no_sync = url + ("&" if "?" in url else "?") + "options=-csynchronous_commit%3Doff"
        with tempfile.TemporaryDirectory() as state_dir:
            rows = [("state dir", os.path.join(state_dir, "state")),
                    (f"PostgreSQL (fsync {settings['fsync']}, synchronous_commit "
                     f"{settings['synchronous_commit']})", url),
                    ("PostgreSQL, session synchronous_commit off (no sync)", no_sync)]
            print(f"{'store':64} " + " ".join(f"{f'{n} proc':>10}" for n in counts)
                  + "   cycles/s")
            for name, location in rows:
                figures = [measure(location, n, options.seconds) for n in counts]
                print(f"{name:64} " + " ".join(f"{f:10.0f}" for f in figures), flush=True)
    finally:
        if server_dir:
            pg_server.stop(server_dir)


if __name__ == "__main__":
    main()
