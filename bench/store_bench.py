#!/usr/bin/env python3
"""Store benchmark: halt+resume cycles per second through each store, from 1 and 4 processes.

    python bench/store_bench.py [--url postgresql://...] [--seconds S] [--processes 1,4,16]

One cycle is what a halt and its resume ask of the store: save frame + approval id, look the id
up, read the frame, claim it through the lifecycle (claim, lease and record in one step, a lease
renewer started), finish it (its record kept as a tombstone, the claimed frame removed); the
program is saved once per process. Without --url a throwaway PostgreSQL cluster is made with durable
settings (fsync on, synchronous_commit on). The "no sync" row sets synchronous_commit off for
the session, to show what the WAL flushes cost. Prints a table; asserts nothing.
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
