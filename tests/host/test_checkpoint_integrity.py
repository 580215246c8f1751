"""What a resume loads is what this store wrote (frame MAC, program content hash: T434, nothing
consumed); every limit is checked before a checkpoint is saved (T423, T424); any parked frame
can be cancelled; any value a child prints can be parked and resumed (lone surrogates). Both
store backends; real child processes."""

from __future__ import annotations

import json
import os

import msgpack
import pytest
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

from vm.service.protocol import Options, handle
from vm.host.store import open_store
from conftest import Cli
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

GATE = "exec --json --shell 'echo [1]' | approve --prompt ok"
OTHER = "exec --json --shell 'echo [2]' | approve --prompt ok | exec --shell 'touch pwned'"


@pytest.fixture
def options(location, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    return Options(cwd=str(work), state_dir=location, env={"PATH": os.environ["PATH"]})


def _is_pg(location: str) -> bool:
    return location.startswith("postgresql://")


def _sql(location: str, statement: str, params: tuple) -> None:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        conn.execute(statement, params)


def _set_frame_body(location: str, state_key: str, body: bytes) -> None:
    """Replace a parked frame's bytes behind the store's back (its MAC and expiry kept)."""
    if _is_pg(location):
        _sql(location, "UPDATE lobster_frames SET body = %s WHERE state_key = %s",
             (body, state_key))
        return
    path = os.path.join(location, "runs", f"{state_key}.frame")
    with open(path, "rb") as fh:
        head = fh.read(4 + 32 + 8)
    with open(path, "wb") as fh:
        fh.write(head + body)


def _set_program(location: str, program_hash: str, body: bytes) -> None:
    if _is_pg(location):
        _sql(location, "UPDATE lobster_programs SET body = %s WHERE hash = %s",
             (body, program_hash))
        return
    with open(os.path.join(location, "programs", f"{program_hash}.lbc"), "wb") as fh:
        fh.write(body)


def _plant(location: str, approval_id: str, state_key: str, body: bytes) -> None:
    """A frame and an approval id the store never wrote (as an earlier version wrote them)."""
    if _is_pg(location):
        _sql(location, "INSERT INTO lobster_frames (state_key, body) VALUES (%s, %s)",
             (state_key, body))
        _sql(location, "INSERT INTO lobster_approvals (approval_id, state_key) VALUES (%s, %s)",
             (approval_id, state_key))
        return
    runs = os.path.join(location, "runs")
    os.makedirs(runs, exist_ok=True)
    os.symlink(state_key, os.path.join(runs, f"{approval_id}.approval"))
    with open(os.path.join(runs, f"{state_key}.frame"), "wb") as fh:
        fh.write(body)


def _parked(options: Options, pipeline: str = GATE):
    envelope = handle({"action": "run", "pipeline": pipeline}, options)
    assert envelope["status"] == "needs_approval", envelope
    approval = envelope["requiresApproval"]
    store = open_store(options.state_dir, {})
    (parked,) = [p for p in store.list_parked()
                 if msgpack.unpackb(p.blob)["pending"]["approval_id"] == approval["approvalId"]]
    return approval, parked, store


def _resume(options, **request):
    return handle({"action": "resume", **request}, options)


NOT_AUTHENTIC = ("Resume state was not written by this state store (a frame or program planted, "
                 "edited or from an earlier version); refused: a cancel removes it")


def test_an_edited_frame_is_refused_and_not_consumed(options):
    approval, parked, store = _parked(options)
    raw = msgpack.unpackb(parked.blob)
    raw["cwd"] = "/"
    _set_frame_body(options.state_dir, parked.state_key, msgpack.packb(raw))
    for request in ({"token": approval["resumeToken"]}, {"approvalId": approval["approvalId"]}):
        refused = _resume(options, approve=True, **request)
        assert refused["error"] == {"type": "runtime_error", "message": NOT_AUTHENTIC,
                                    "code": "T434"}
    assert store.read_parked(parked.state_key) is not None  # nothing consumed
    _set_frame_body(options.state_dir, parked.state_key, parked.blob)
    done = _resume(options, token=approval["resumeToken"], approve=True)
    assert done["status"] == "ok" and done["output"] == [1], done


def test_a_replaced_program_is_refused(options, tmp_path):
    """A process that reads the program from the store refuses one replaced there; the process
    that parked the run holds the program it verified, and runs that one (never the store's)."""
    approval, parked, store = _parked(options)
    program_hash = msgpack.unpackb(parked.blob)["program_hash"]
    _other, other, _ = _parked(options, OTHER)
    other_program = store.load_program_bytes(msgpack.unpackb(other.blob)["program_hash"])
    # another program's bytes; then that program with its header claiming the first's hash
    forged = msgpack.unpackb(other_program)
    forged["header"]["program_hash"] = program_hash
    (tmp_path / "fresh").mkdir()
    fresh = Cli(tmp_path / "fresh")  # real processes, which hold no program
    for body in (other_program, msgpack.packb(forged)):
        _set_program(options.state_dir, program_hash, body)
        refused, code = fresh.tool("resume", "--token", approval["resumeToken"], "--approve",
                                   "yes", env={"LOBSTER_STATE_DIR": options.state_dir})
        assert refused["error"]["code"] == "T434" and code != 0, refused
        assert refused["error"]["message"] == NOT_AUTHENTIC
    assert not os.path.exists(os.path.join(options.cwd, "pwned"))
    done = _resume(options, token=approval["resumeToken"], approve=True)
    assert done["status"] == "ok" and done["output"] == [1], done
    assert not os.path.exists(os.path.join(options.cwd, "pwned"))


def test_a_planted_frame_behind_an_approval_id_is_refused_and_can_be_cancelled(options):
    _approval, parked, store = _parked(options)
    state_key = "pipeline_resume_" + "0" * 32
    _plant(options.state_dir, "0badcafe", state_key, parked.blob)  # real bytes, not written here
    refused = _resume(options, approvalId="0badcafe", approve=True)
    assert refused["error"]["code"] == "T434", refused
    assert store.read_parked(state_key) is not None
    assert _resume(options, approvalId="0badcafe", cancel=True)["status"] == "cancelled"
    assert store.read_parked(state_key) is None and store.lookup_approval_id("0badcafe") is None


def test_a_frame_moved_to_another_key_is_refused(options):
    first, parked, store = _parked(options)
    second, other, _ = _parked(options)
    _set_frame_body(options.state_dir, other.state_key, parked.blob)  # first's frame, second's key
    refused = _resume(options, token=second["resumeToken"], approve=True)
    assert refused["error"]["code"] == "T434", refused


def test_an_envelope_over_max_stdout_bytes_parks_nothing(options):
    prompt = "p" * 1500
    envelope = handle({"action": "run", "maxStdoutBytes": 1024,
                       "pipeline": f"exec --json --shell 'echo [1]' | approve --prompt {prompt}"},
                      options)
    assert envelope["error"] == {"type": "runtime_error", "code": "T423",
                                 "message": "lobster runtime result exceeded maxStdoutBytes"}
    store = open_store(options.state_dir, {})
    assert store.list_parked() == [] and store.leftovers(float("inf")) == []


BIG = "import json, sys; sys.stdout.write(json.dumps(['x' * 1000000] * 34))"


def test_a_frame_over_the_load_limit_is_refused_before_it_is_saved(options, tmp_path):
    (tmp_path / "work" / "big.py").write_text(BIG)
    envelope = handle({"action": "run", "maxStdoutBytes": 300_000_000,
                       "pipeline": "exec --json --shell 'python3 big.py' | approve --prompt ok"},
                      options)
    assert envelope["error"]["code"] == "T424", envelope
    assert envelope["error"]["message"].startswith(
        "lobster runtime checkpoint cannot be stored: it is ")
    assert envelope["error"]["message"].endswith(" bytes, over the limit of 67108864")
    store = open_store(options.state_dir, {})
    assert store.list_parked() == [] and store.leftovers(float("inf")) == []


def _reseal(location: str, store, state_key: str, body: bytes) -> None:
    """Replace a parked frame's bytes with a MAC that matches them (as only the store can)."""
    from vm.host.store.base import frame_mac

    mac = frame_mac(store.key(), state_key, body)
    if _is_pg(location):
        _sql(location, "UPDATE lobster_frames SET body = %s, mac = %s WHERE state_key = %s",
             (body, mac, state_key))
        return
    path = os.path.join(location, "runs", f"{state_key}.frame")
    with open(path, "rb") as fh:
        head = fh.read(4 + 32 + 8)
    with open(path, "wb") as fh:
        fh.write(head[:4] + mac + head[36:] + body)


def test_a_frame_planted_over_the_load_limit_can_still_be_cancelled(options, monkeypatch):
    from vm.isa import codec

    assert codec.MAX_BLOB == 64 * 1024 * 1024
    monkeypatch.setattr(codec, "MAX_BLOB", 1024 * 1024)  # the same check, 64 times cheaper
    for ident in ("token", "approvalId"):
        approval, parked, store = _parked(options)
        _reseal(options.state_dir, store, parked.state_key,
                parked.blob + b"\0" * (codec.MAX_BLOB + 1))  # authentic, and too big to load
        refused = _resume(options, token=approval["resumeToken"], approve=True)
        assert refused["error"]["message"] == "Resume state is corrupt: blob too large", refused
        key = "resumeToken" if ident == "token" else "approvalId"
        done = _resume(options, cancel=True, **{ident: approval[key]})
        assert done["status"] == "cancelled", done
        assert store.read_parked(parked.state_key) is None


SURROGATE = '[{"subject":"broken \\ud83d"}]'


def test_a_lone_surrogate_parks_and_resumes_through_two_gates(cli):
    """A child prints a lone surrogate into both gates of a pipeline; each halt parks, each
    resume is a new process, the side effect between them runs once, nothing is left."""
    (cli.work / "out.json").write_text(SURROGATE)
    pipeline = ("exec --json --shell 'cat out.json' | approve --prompt one"
                " | exec --json --shell 'echo x >> effects.log; cat out.json'"
                " | approve --prompt two")
    first, code = cli.pipeline(pipeline)
    assert code == 0 and first["status"] == "needs_approval", first
    assert first["requiresApproval"]["items"] == [{"subject": "broken \ud83d"}]
    second, code = cli.tool("resume", "--mode", "tool", "--token",
                            first["requiresApproval"]["resumeToken"], "--approve", "yes")
    assert code == 0 and second["status"] == "needs_approval", second
    assert second["requiresApproval"]["prompt"] == "two"
    assert (cli.work / "effects.log").read_text() == "x\n"
    done, code = cli.tool("resume", "--mode", "tool", "--id",
                          second["requiresApproval"]["approvalId"], "--approve", "yes")
    assert code == 0 and done["output"] == [{"subject": "broken \ud83d"}], done
    assert (cli.work / "effects.log").read_text() == "x\n"
    left = os.listdir(cli.state / "runs")  # no frame or claim: the two tombstones and ids
    left.remove(".spare")  # and the files the store is done with, kept for reuse
    assert len(left) == 4 and all(n.endswith((".record", ".approval")) for n in left), left
    cli.run("gc", env={"LOBSTER_TOMBSTONE_TTL": "0s"})
    assert os.listdir(cli.state / "runs") == [".spare"]


def test_a_lone_surrogate_in_a_workflow_gate_and_in_state(cli):
    (cli.work / "out.json").write_text(SURROGATE)
    (cli.work / "w.lobster").write_text(
        "steps:\n  - id: data\n    run: cat out.json\n"
        "  - id: gate\n    approval: ship?\n    stdin: $data.json\n"
        "  - id: keep\n    stdin: $data.json\n    pipeline: state.set s\n")
    parked, _ = cli.tool("run", "--mode", "tool", "w.lobster")
    assert parked["status"] == "needs_approval", parked
    done, code = cli.tool("resume", "--mode", "tool", "--token",
                          parked["requiresApproval"]["resumeToken"], "--approve", "yes")
    assert code == 0 and done["status"] == "ok", done
    got, _ = cli.pipeline("state.get s")
    stored = json.loads((cli.state / "values" / "s.json").read_text())
    assert stored in ({"subject": "broken \ud83d"}, [{"subject": "broken \ud83d"}])
    assert got["output"] in ([stored], stored), got
