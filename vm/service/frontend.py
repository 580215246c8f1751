"""What `vm` needs from a compiler, and how it finds one: `lobsterc` registers itself under the
`lobster.frontend` entry point group; an embedder may pass its own in `Options(frontend=...)`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

from vm.isa.program import Program
from vm.host.store import StateStore

ENTRY_POINT_GROUP = "lobster.frontend"
WORKFLOW_EXTENSIONS = (".lobster", ".yaml", ".yml", ".json")  # any other source is a pipeline


class Frontend(Protocol):
    """A compiler. Every method that reads a source raises `CompileError` for a bad one."""

    CompileError: type[Exception]

    def compile_pipeline(self, text: str, store: StateStore | None = None) -> Program:
        """The program for inline pipeline text (from the compile cache in `store`, if any)."""

    def compile_workflow(self, path: str, store: StateStore | None = None) -> Program:
        """The program for a workflow file; a cached one only while none of its files changed."""

    def plan_pipeline(self, text: str) -> str:
        """The dry-run plan of a pipeline."""

    def plan_workflow(self, path: str, args: dict) -> str:
        """The dry-run plan of a workflow file under `args`."""

    def graph_formats(self) -> tuple[str, ...]:
        """The names `graph` takes as `fmt`."""

    def graph(self, path: str, fmt: str, args: dict) -> str:
        """A workflow file's graph in one of `graph_formats()`."""

    def check_migration(self, old: Program, new: Program, frame: Any,
                        accept: tuple[str, ...] = (), source: str | None = None) -> Any:
        """Whether a frame paused in `old` may continue in `new` (compiled from `source`, if
        given): a vm.service.migrate.MigrationCheck (optional: only `lobster migrate` needs it)."""

    def error_fields(self, exc: Exception) -> dict[str, Any]:
        """A compile error as envelope fields: message, code, location (or None); the
        envelope's error type is the code's, from vm/core/codes.py (`kind`, if given, is
        informational)."""

    def render_error(self, exc: Exception) -> str:
        """A compile error for a terminal: every diagnostic with its source line and caret."""


class FrontendMissing(Exception):
    """No compiler is installed (or the one registered cannot be loaded)."""


@lru_cache(maxsize=1)
def find_frontend() -> Frontend:
    """The installed compiler, looked up once per process (importlib.metadata is imported here
    only: a process that runs no compile never pays for it)."""
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    if not found:
        raise FrontendMissing("no Lobster compiler is installed (nothing is registered under "
                              f"the {ENTRY_POINT_GROUP!r} entry point group)")
    try:
        return found[0].load()
    except Exception as exc:  # noqa: BLE001 - a broken install, reported as such
        raise FrontendMissing(f"the Lobster compiler {found[0].value!r} could not be loaded: "
                              f"{exc}") from None
