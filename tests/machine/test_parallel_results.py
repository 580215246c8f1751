"""`parallel` step results as the original shapes them (DIVERGENCES D11, D24, D25): `wait: all`
keeps only branches that printed JSON; `wait: any` is `{winner: json}` with the winner's own
stdout, and the first branch to fail fails the step with its own message."""

from __future__ import annotations

from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process


def run(cli, text: str) -> tuple[dict, int]:
    (cli.work / "p.lobster").write_text(text)
    return cli.tool("run", "--mode", "tool", "p.lobster")


def test_wait_all_leaves_out_branches_without_json(cli):
    env, code = run(cli, "steps:\n  - id: p\n    parallel:\n      branches:\n"
                         "        - {id: b1, run: echo text}\n"
                         "        - {id: b2, run: \"echo '{\\\"v\\\":1}'\"}\n"
                         "        - {id: b3, run: \"true\"}\n")
    assert (code, env["output"]) == (0, [{"b2": {"v": 1}}])


def test_wait_any_is_the_winner_under_its_id(cli):
    env, code = run(cli, "steps:\n  - id: p\n    parallel:\n      wait: any\n      branches:\n"
                         "        - {id: b, run: echo 1}\n")
    assert (code, env["output"]) == (0, [{"b": 1}])
    env, code = run(cli, "steps:\n  - id: p\n    parallel:\n      wait: any\n      branches:\n"
                         "        - {id: b, run: echo hello}\n  - id: s\n    run: cat\n"
                         "    stdin: $p.stdout\n")
    assert (code, env["output"]) == (0, ["hello\n"])


def test_wait_any_failure_keeps_the_branch_message(cli):
    env, code = run(cli, "steps:\n  - id: p\n    parallel:\n      wait: any\n      branches:\n"
                         "        - {id: f, run: exit 3}\n")
    assert (code, env["error"]["message"]) == (1, "workflow command failed (3): exit 3")
    env, code = run(cli, "steps:\n  - id: p\n    parallel:\n      branches:\n"
                         "        - {id: f, run: exit 3}\n")
    assert env["error"]["message"] == "Parallel branch failed: workflow command failed (3): exit 3"


def test_a_branch_inherits_the_runs_source_directory(tmp_path):
    """Frame.fork hands a branch the main file's directory, and the run's events keep it: the
    failed event of a step after the parallel one names its file as the envelope does."""
    from vm.service.protocol import Options, handle

    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "p.lobster").write_text(
        "steps:\n  - id: p\n    parallel:\n      branches:\n        - {id: b, run: echo 1}\n"
        "  - id: boom\n    run: exit 3\n")
    events: list[dict] = []
    env = handle({"action": "run", "pipeline": "flows/p.lobster"},
                 Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s"), env={},
                         on_event=events.append))
    (failed,) = [e for e in events if e["type"] == "failed"]
    assert failed["location"] == env["error"]["location"]
    assert failed["location"]["file"] == str((tmp_path / "flows" / "p.lobster").resolve())
