"""The state directory: programs by hash, frames by run key, approval ids, the signing key,
and `state.*` values. Every write is atomic (temp file, fsync, rename, fsync of the dir).

  <state>/key                      32 random bytes, mode 0600, created on first use
  <state>/programs/<hash>.lbc      compiled programs (msgpack), written once
  <state>/runs/<state_key>.frame   parked frames (msgpack); claimed by an atomic rename
  <state>/approvals/<id>           approval id -> state key (exclusive publish, never overwritten)
  <state>/values/<key>.json        state.get / state.set / diff.last values (pretty JSON)
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path


class StoreError(Exception):
    """The state directory could not be read or written."""


def default_state_dir(env: dict | os._Environ = os.environ) -> str:
    configured = (env.get("LOBSTER_STATE_DIR") or "").strip()
    return configured or os.path.join(os.path.expanduser("~"), ".lobster", "state")


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_KEY_CHARS = re.compile(r"[^a-z0-9._-]+")


def value_file_name(key: str) -> str:
    """`state.*` key -> file name, as the reference normalises it (`_Demo KEY_` -> demo_key)."""
    name = _KEY_CHARS.sub("_", key.lower())
    name = re.sub(r"_+", "_", name)
    if name.startswith("_"):
        name = name[1:]
    if name.endswith("_"):
        name = name[:-1]
    if not name:
        raise StoreError("state key is empty/invalid")
    return name + ".json"


class Store:
    def __init__(self, root: str) -> None:
        self.root = Path(root)

    # signing key ---------------------------------------------------------------------------
    def key(self) -> bytes:
        path = self.root / "key"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        key = secrets.token_bytes(32)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".key.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # first writer wins; a concurrent creator reads the winner's key
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return path.read_bytes()

    def existing_key(self) -> bytes | None:
        try:
            return (self.root / "key").read_bytes()
        except FileNotFoundError:
            return None

    # programs ------------------------------------------------------------------------------
    def program_path(self, program_hash: str) -> Path:
        return self.root / "programs" / f"{program_hash}.lbc"

    def save_program(self, program_hash: str, blob: bytes) -> None:
        path = self.program_path(program_hash)
        if not path.exists():
            atomic_write(path, blob, 0o644)

    def load_program_bytes(self, program_hash: str) -> bytes | None:
        try:
            return self.program_path(program_hash).read_bytes()
        except FileNotFoundError:
            return None

    # frames --------------------------------------------------------------------------------
    def frame_path(self, state_key: str) -> Path:
        return self.root / "runs" / f"{state_key}.frame"

    def save_frame(self, state_key: str, blob: bytes) -> None:
        atomic_write(self.frame_path(state_key), blob)

    def read_frame(self, state_key: str) -> bytes | None:
        try:
            return self.frame_path(state_key).read_bytes()
        except FileNotFoundError:
            return None

    def claim_frame(self, state_key: str) -> Path | None:
        """Take the frame for this resume: exactly one concurrent caller gets it."""
        src = self.frame_path(state_key)
        dst = src.with_name(f".{src.name}.claimed.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            return None
        return dst

    def delete_frame(self, state_key: str) -> bool:
        try:
            self.frame_path(state_key).unlink()
            return True
        except FileNotFoundError:
            return False

    # approval ids --------------------------------------------------------------------------
    def publish_approval_id(self, state_key: str) -> str | None:
        """A fresh 8-hex id pointing at `state_key`. Created exclusively (an existing id is
        never overwritten) and synced before the id is handed out; a file torn by a crash
        before that reads as an unknown id, and nobody was ever given it."""
        directory = self.root / "approvals"
        directory.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"stateKey": state_key, "createdAt": time.time()}).encode()
        for _ in range(16):
            approval_id = secrets.token_hex(4)
            try:
                fd = os.open(directory / approval_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            _fsync_dir(directory)
            return approval_id
        return None

    def lookup_approval_id(self, approval_id: str) -> str | None:
        clean = re.sub(r"[^a-f0-9]", "", approval_id.lower())
        if not clean:
            return None
        try:
            data = json.loads((self.root / "approvals" / clean).read_text())
        except (OSError, ValueError):
            return None
        key = data.get("stateKey") if isinstance(data, dict) else None
        return key if isinstance(key, str) else None

    def remove_approval_id(self, approval_id: str | None) -> None:
        if approval_id:
            (self.root / "approvals" / approval_id).unlink(missing_ok=True)

    # state.* values ------------------------------------------------------------------------
    def value_path(self, key: str) -> Path:
        return self.root / "values" / value_file_name(key)

    def get_value(self, key: str, default=None):
        try:
            text = self.value_path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return default
        try:
            return json.loads(text)
        except ValueError:
            return default

    def set_value(self, key: str, value) -> None:
        text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
        atomic_write(self.value_path(key), text.encode("utf-8"))
