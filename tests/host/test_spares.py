"""The state directory's spares (vm/host/store/files.py): files the store is done with are
kept and written over as its next temp files, so a steady cycle makes two new files (its
record and its approval id, which stay) and frees none."""

from __future__ import annotations

import os
import threading

import pytest

from vm.host.store import Store, files
from vm.host.store.lifecycle import decode_record
from vm.service.protocol import Decision, Options, handle, resume


@pytest.fixture(autouse=True)
def _new_process():
    """Each test starts as a new process would: knowing no spare yet."""
    files._spare_names.clear()
    yield
    files._spare_names.clear()


def _inodes(directory) -> dict[int, str]:
    found = {}
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            found[os.lstat(path).st_ino] = os.path.relpath(path, directory)
    return found


def test_a_steady_cycle_makes_only_its_record_and_its_id_and_frees_nothing(tmp_path):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    runs = tmp_path / "state" / "runs"

    def cycle() -> None:
        token = handle({"action": "run", "pipeline": "state.get x | approve --prompt ok"},
                       options)["requiresApproval"]["resumeToken"]
        assert resume(options, Decision(approve=True), token=token)["status"] == "ok"

    cycle()
    cycle()
    before = _inodes(runs)
    for _ in range(10):
        cycle()
    after = _inodes(runs)
    assert set(before) <= set(after)  # no file was removed: each went to the spares
    made = [after[ino] for ino in set(after) - set(before)]
    assert len(made) == 20 and sorted({name.rsplit(".", 1)[1] for name in made}) == [
        "approval", "record"], made


def test_a_spare_is_written_over_to_exactly_the_new_bytes_and_mode(tmp_path):
    (tmp_path / "runs").mkdir()
    path = str(tmp_path / "runs" / "x")
    files.atomic_write(path, b"old " * 1000)
    assert files.retire(path)
    (spare,) = os.listdir(tmp_path / "runs" / ".spare")
    spare_ino = os.stat(tmp_path / "runs" / ".spare" / spare).st_ino
    files.atomic_write(str(tmp_path / "runs" / "y"), b"new", mode=0o640)
    assert open(tmp_path / "runs" / "y", "rb").read() == b"new"
    info = os.stat(tmp_path / "runs" / "y")
    assert info.st_ino == spare_ino and info.st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path / "runs" / ".spare") == []


def test_a_spare_that_is_still_a_live_file_is_never_written_over(tmp_path):
    # a crash between the link and the replace of a kept record leaves a spare that is the
    # live record too: the next process lets go of that name and makes a new file
    runs = tmp_path / "runs"
    store = Store(str(tmp_path))
    store.write_record("pipeline_resume_" + "a" * 32, b'{"live": true}')
    record = runs / ("pipeline_resume_" + "a" * 32 + ".record")
    os.makedirs(runs / ".spare")
    os.link(record, runs / ".spare" / "0123456789abcdef.spare")
    files._spare_names.clear()
    files.atomic_write(str(runs / "other"), b"other bytes")
    assert record.read_bytes() == b'{"live": true}' and os.stat(record).st_nlink == 1
    assert os.listdir(runs / ".spare") == []
    assert os.stat(runs / "other").st_ino != os.stat(record).st_ino


def test_retire_keeps_small_files_up_to_the_limit_and_removes_the_rest(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    big = directory / "big"
    big.write_bytes(b"x" * (files.SPARE_BYTES + 1))
    assert files.retire(str(big)) and not big.exists()
    assert not (directory / ".spare").exists()  # too large to keep
    os.symlink("somewhere", directory / "link")
    assert files.retire(str(directory / "link")) and not os.path.lexists(directory / "link")
    for index in range(files.SPARE_LIMIT + 5):
        (directory / f"f{index}").write_bytes(b"small")
        assert files.retire(str(directory / f"f{index}"))
    assert sorted(os.listdir(directory)) == [".spare"]
    assert len(os.listdir(directory / ".spare")) == files.SPARE_LIMIT
    assert files.retire(str(directory / "never-there")) is False


def test_threads_writing_at_once_never_share_a_spare(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    for index in range(40):
        (directory / f"seed{index}").write_bytes(b"seed" * index)
        files.retire(str(directory / f"seed{index}"))
    errors = []

    def writer(number: int) -> None:
        try:
            for round_ in range(30):
                path = str(directory / f"w{number}")
                files.atomic_write(path, f"{number}:{round_}".encode() * (round_ + 1),
                                   sync=False, keep_replaced=True)
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for number in range(8):
        assert (directory / f"w{number}").read_bytes() == f"{number}:29".encode() * 30
        assert os.stat(directory / f"w{number}").st_nlink == 1
    assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_a_record_of_another_checkpoint_does_not_read():
    blob = b'{"v": 1, "stateKey": "pipeline_resume_b", "state": "finished", "events": []}'
    assert decode_record(blob, "pipeline_resume_b")["state"] == "finished"
    assert decode_record(blob, "pipeline_resume_a") is None
