"""Where and how requests run: the `Options` an embedder or the CLI sets once, the `Settings`
of one run (its bounds, read from the request or the options), and the durations read from
the environment (checkpoint TTL, claim lease, tombstone)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import evolve, field

from vm.core.records import frozen
from vm.core import bounds
from vm.host.commands import Context
from vm.host.children import Scope
from vm.host.store import StateStore, open_store
from vm.service.protocol.envelope import RequestError

if TYPE_CHECKING:
    from vm.engine.events import Event
    from vm.service.frontend import Frontend

DEFAULT_TIMEOUT_MS = 20000
DEFAULT_MAX_STDOUT_BYTES = 512000


@frozen
class Options:
    """Where and how requests run, set once by the CLI or an embedding gateway and shared by
    every request: a request never changes them (its own values make a `Settings`).

    Fields (all optional):

    - `env`: the environment runs see and Lobster's own variables are read from (README,
      "Environment variables"); default `os.environ`.
    - `cwd`: the base working directory; a request's `cwd` is relative to it and must stay
      inside it. Default: the process's working directory.
    - `state_dir`: where checkpoints live: a directory, or a `postgresql://` URL. Default:
      `LOBSTER_STORE`, else `LOBSTER_STATE_DIR`, else `~/.lobster/state`.
    - `mode`: `"tool"` (envelopes; never prompts) or `"human"` (the CLI's interactive mode).
    - `timeout_ms`, `max_stdout_bytes`: bounds of `run` and `resume`; for a tool request,
      the defaults under its `timeoutMs` / `maxStdoutBytes`, before the protocol's own
      (20000 ms, 512000 bytes).
    - `write`: receives what renderers (`table`, `json`) print in human mode.
    - `ask_line`: asks a question on a terminal (human mode); None: never ask.
    - `log`: receives diagnostic lines (`[RETRY]`, cost warnings).
    - `stdin_is_tty`: whether the caller's stdin is a terminal (human-mode prompts).
    - `report`: receives a compile error, or a runtime trap (`vm.engine.outcome.Failed`), before it
      is flattened into an envelope (the CLI prints excerpts from it); and the halt
      (`vm.isa.frame.Pending`) of a parked run (the CLI renders a human-mode halt from it).
    - `frontend`: the compiler (`vm.service.frontend.Frontend`); None: the installed one, found
      through the `lobster.frontend` entry point on first use.
    - `checkpoint_ttl_ms`: a new checkpoint expires this many ms after its halt; None:
      `LOBSTER_CHECKPOINT_TTL`, else never.
    - `on_event`: hears every run's events (`vm.engine.events.Event`: step started, finished,
      retried, skipped, halted, failed, child stderr lines) on a thread of its own; events
      never change the envelope, except that one with events dropped for a callback too far
      behind says how many in `eventsDropped` (vm.engine.events). For one request:
      `handle(request, evolve(options, on_event=cb))`.
    """

    env: Mapping[str, str] = field(factory=lambda: os.environ)
    cwd: str = field(factory=os.getcwd)
    state_dir: str | None = None
    mode: str = "tool"
    timeout_ms: int | None = None
    max_stdout_bytes: int | None = None
    write: Callable[[str], None] = field(default=lambda text: None)
    ask_line: Callable[[str], str] | None = None
    log: Callable[[str], None] = field(default=lambda text: None)
    stdin_is_tty: bool = False
    report: Callable[[Any], None] | None = None
    frontend: Frontend | None = None
    checkpoint_ttl_ms: int | None = None
    on_event: Callable[[Event], None] | None = None

    def store(self) -> StateStore:
        """The store at `state_dir` (a directory, or a `postgresql://` URL), else the one
        LOBSTER_STORE or LOBSTER_STATE_DIR names, else ~/.lobster/state."""
        return open_store(self.state_dir, self.env)

    def context(self, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Context:
        """The context of a run under these options alone, in its own scope."""
        ctx = evolve(Settings.of(self), cwd=cwd or self.cwd).context(self, Scope())
        return ctx if env is None else evolve(ctx, env=env)


@frozen
class Settings:
    """One run's own values, derived from the Options and the request (or the parked frame)."""

    cwd: str
    mode: str
    timeout_ms: int | None = None
    max_stdout_bytes: int | None = None  # caps each child's output and the envelope
    checkpoint_ttl_ms: int | None = None  # this call's own TTL, before the workflow's

    @classmethod
    def of(cls, options: Options, checkpoint_ttl_ms: int | None = None) -> Settings:
        """The options' own bounds, each checked against vm/core/bounds.py (E010), with a
        call's own checkpoint TTL if it gave one."""
        return cls(options.cwd, options.mode, option_bound(options, "timeout_ms"),
                   option_bound(options, "max_stdout_bytes"), checkpoint_ttl_ms)

    @classmethod
    def of_request(cls, request: dict[str, Any], options: Options) -> Settings:
        """A tool request's bounds: its own (floored), else the options', else the defaults."""
        timeout_ms = _positive(request, "timeoutMs",
                               option_bound(options, "timeout_ms") or DEFAULT_TIMEOUT_MS,
                               floor=200)
        max_stdout_bytes = _positive(request, "maxStdoutBytes",
                                     option_bound(options, "max_stdout_bytes")
                                     or DEFAULT_MAX_STDOUT_BYTES, floor=1024)
        return cls(options.cwd, options.mode, timeout_ms, max_stdout_bytes,
                   request_ttl_ms(request.get("checkpointTtl"), "checkpointTtl"))

    def output_cap(self, env: Mapping[str, str]) -> int | None:
        caps = [c for c in (self.max_stdout_bytes, _env_int(env, "LOBSTER_MAX_OUTPUT_BYTES"))
                if c is not None]
        return min(caps) if caps else None

    def context(self, options: Options, scope: Scope) -> Context:
        """The context the run's commands see; its deadline starts now."""
        deadline = None if self.timeout_ms is None else time.monotonic() + self.timeout_ms / 1000
        return Context(env=options.env, cwd=self.cwd, store=options.store(),
                       mode=self.mode, deadline=deadline,
                       max_output_bytes=self.output_cap(options.env),
                       stdin_is_tty=options.stdin_is_tty, scope=scope)


_OPTION_BOUNDS = {"timeout_ms": bounds.TIMEOUT_MS, "max_stdout_bytes": bounds.MAX_STDOUT_BYTES}


def option_bound(options: Options, name: str) -> int | None:
    """An `Options` field under its bound (None: not set), else a RequestError (E010)."""
    value = getattr(options, name)
    if value is None:
        return None
    try:
        return _OPTION_BOUNDS[name].parse(value, f"Options.{name}", text=False)
    except bounds.BoundError as exc:
        unit = _OPTION_BOUNDS[name].unit
        message = exc.message if exc.kind == "range" else \
            f"Options.{name} must be a positive number of {unit}, got {bounds.shown(value)}"
        raise RequestError(message, "E010") from None


def _positive(request: dict[str, Any], name: str, default: int, floor: int) -> int:
    """A request's numeric bound (`timeoutMs`, `maxStdoutBytes`; vm/core/bounds.py), raised to
    `floor`; `default` when absent."""
    value = request.get(name)
    if value is None:
        return default
    try:
        number = bounds.BOUNDS[name].parse(value, name, text=False)
    except bounds.BoundError as exc:
        raise RequestError(f"{name} must be a positive number" if exc.kind == "form"
                           else exc.message) from None
    return max(number, floor)


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not (raw.isascii() and raw.isdigit()):
        return None
    if len(raw) > 18:  # more than any machine could hold: no cap in practice
        return 10**18
    return int(raw) or None


# durations ----------------------------------------------------------------------------------
LEASE_VARIABLE = "LOBSTER_CLAIM_LEASE"
TOMBSTONE_VARIABLE = "LOBSTER_TOMBSTONE_TTL"


def request_ttl_ms(value: Any, name: str) -> int | None:
    """A call's own checkpoint TTL (`checkpointTtl`, `--checkpoint-ttl`): a duration such as
    30m, 12h or 7d, or a positive integer of ms, at most bounds.CHECKPOINT_TTL; None when not
    given. Else a parse error (E001) naming the limit."""
    if value is None:
        return None
    try:
        return bounds.CHECKPOINT_TTL.parse(value, name)
    except bounds.BoundError as exc:
        raise RequestError(exc.message) from None


def checkpoint_ttl_ms(options: Options) -> int | None:
    """How long a new checkpoint stays resumable by default (under a call's own TTL and the
    workflow's `checkpoint_ttl`): `Options.checkpoint_ttl_ms`, else LOBSTER_CHECKPOINT_TTL,
    else forever. A bad value, or one past bounds.CHECKPOINT_TTL, is a RequestError (E004)."""
    ttl = options.checkpoint_ttl_ms
    ttl_bound = bounds.CHECKPOINT_TTL
    if ttl is not None:
        try:
            return ttl_bound.parse(ttl, "checkpoint_ttl_ms", text=False)
        except bounds.BoundError as exc:
            message = (f"checkpoint_ttl_ms must be a positive number of milliseconds, got "
                       f"{bounds.shown(ttl)}" if exc.kind == "form" else exc.message)
            raise RequestError(message, "E004") from None
    raw = (options.env.get("LOBSTER_CHECKPOINT_TTL") or "").strip()
    if not raw:
        return None
    try:
        return ttl_bound.parse(raw, "LOBSTER_CHECKPOINT_TTL")
    except bounds.BoundError as exc:
        message = (f"LOBSTER_CHECKPOINT_TTL must be a duration such as 7d, 12h or 30m, got "
                   f"{bounds.shown(raw)}" if exc.kind == "form" else exc.message)
        raise RequestError(message, "E004") from None


def claim_lease_s(options: Options) -> float:
    """How long a claim's lease runs before its resume must renew it (renewed every third of
    it): LOBSTER_CLAIM_LEASE (a duration, at least 1s), else 30 s. A bad value is E004."""
    from vm.host.store import lifecycle  # (a resume's: a run never loads it)

    return _env_duration_s(options.env, LEASE_VARIABLE, lifecycle.LEASE_S, bounds.CLAIM_LEASE)


def tombstone_s(options: Options) -> float:
    """How long the record of an ended checkpoint is kept before gc removes it:
    LOBSTER_TOMBSTONE_TTL (a duration), else 7 days. A bad value is E004."""
    from vm.host.store import lifecycle

    return _env_duration_s(options.env, TOMBSTONE_VARIABLE, lifecycle.TOMBSTONE_S,
                           bounds.TOMBSTONE_TTL)


def _env_duration_s(env: Mapping[str, str], name: str, default: float,
                    bound: bounds.Bound) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        return bound.parse(raw, name) / 1000
    except bounds.BoundError as exc:
        raise RequestError(str(exc), "E004") from None
