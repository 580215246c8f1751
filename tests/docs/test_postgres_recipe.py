"""docs/fleet.md's recipe works: scripts/throwaway-postgres.sh starts a server whose
LOBSTER_STORE a run halts into and a resume continues from, and stops it again. Skipped where
the PostgreSQL server binaries or psycopg are not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from glob import glob
from pathlib import Path

import pytest
from conftest import ROOT, run_in_process

SCRIPT = ROOT / "scripts" / "throwaway-postgres.sh"


def _have_server() -> bool:
    return bool(shutil.which("initdb") or glob("/usr/lib/postgresql/*/bin/initdb"))


@pytest.fixture
def store_url():
    if not _have_server():
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl)")
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    started = subprocess.run([str(SCRIPT), "start"], check=False, capture_output=True,
                             text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    line = started.stdout.strip()
    assert line.startswith("export LOBSTER_STORE='postgresql://") and line.endswith("'"), line
    url = line.split("=", 1)[1].strip("'")
    directory = url.split("host=", 1)[1]
    yield url
    from vm.host.store.postgres_pool import close_pools

    close_pools()
    stopped = subprocess.run([str(SCRIPT), "stop", directory], check=False,
                             capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not os.path.exists(directory)


def test_the_throwaway_server_holds_a_checkpoint_until_it_is_resumed(store_url, tmp_path: Path):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "TZ": "UTC",
           "LOBSTER_STORE": store_url}
    halted = run_in_process(["lobster", "run", "--mode", "tool",
                             "exec --json --shell 'echo [1]' | approve --prompt ok"],
                            cwd=tmp_path, env=env)
    approval = json.loads(halted.stdout)["requiresApproval"]["approvalId"]
    assert not (tmp_path / ".lobster").exists()  # the checkpoint went to the server
    done = run_in_process(["lobster", "resume", "--id", approval, "--approve", "yes"],
                          cwd=tmp_path, env=env)
    assert json.loads(done.stdout)["output"] == [1], done.stdout


def test_the_recipe_in_the_fleet_guide_is_the_one_tested():
    guide = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    assert 'eval "$(scripts/throwaway-postgres.sh start)"' in guide
    assert "scripts/throwaway-postgres.sh stop" in guide


def test_stop_refuses_a_folder_it_did_not_make(tmp_path: Path):
    (tmp_path / "keep").write_text("x")
    stopped = subprocess.run([str(SCRIPT), "stop", str(tmp_path)], check=False,
                             capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 1 and "no server this script started" in stopped.stderr
    assert (tmp_path / "keep").exists()
