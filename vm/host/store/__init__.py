"""The store a run's state lives in: `open_store` picks the backend from a location (a state
directory path, or a `postgresql://` URL); `StateStore` is what every backend provides;
`lifecycle` owns a checkpoint's states (claim, lease, finish, doubt, cancel) on top of it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from vm.host.store.base import (CacheEntry, Parked, StateStore, StoreError, default_state_dir,
                                value_file_name)
from vm.host.store.directory import Store
from vm.host.store.files import atomic_write, make_private_dirs

__all__ = ["CacheEntry", "Claimant", "ClaimRecord", "Parked", "StateStore", "Store",
           "StoreError", "atomic_write", "default_state_dir", "is_postgres_url",
           "make_private_dirs", "open_store", "value_file_name"]


def is_postgres_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_store(location: str | None = None,
               env: Mapping[str, str] = os.environ) -> StateStore:
    """The store at `location`; None means LOBSTER_STORE, then LOBSTER_STATE_DIR, then
    ~/.lobster/state. A PostgreSQL URL gives the PostgreSQL store (its driver is imported only
    then, and its connection pool is shared by every store of that URL in this process)."""
    if location is None:
        location = (env.get("LOBSTER_STORE") or "").strip() or default_state_dir(env)
    if is_postgres_url(location):
        from vm.host.store.postgres import PostgresStore

        return PostgresStore(location)
    return Store(location)


def __getattr__(name: str):
    if name in ("Claimant", "ClaimRecord"):  # attrs classes: built only when claims are used
        from vm.host.store import claims

        return getattr(claims, name)
    raise AttributeError(f"module 'vm.host.store' has no attribute {name!r}")
