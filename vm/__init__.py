"""The Lobster VM: runs compiled Programs, saves and resumes Frames. Never imports lark.

The embedding API, importable from here (each name is loaded on first use, so `import vm`
stays cheap):

- `handle(request, options)`: one tool request (`run` or `resume`) -> its envelope.
- `Options`: where and how requests run (state store, cwd, bounds, callbacks).
- `run`, `resume`, `Decision`: the same as keyword calls, for a caller holding a Program.
- `Scope`: a run's cancellation scope (`handle(..., scope=s)`, then `s.cancel()`).
- `RequestError`: a refused request, carrying its error envelope.
- `open_store`, `StateStore`: the checkpoint store (a directory or PostgreSQL).
- `history(options, id)`: one checkpoint's record (halted, claimed: by whom and the approver,
  how it ended), by approval id, resume token or state key: the audit trail.
- `vm.service.admin`: `pending`, `cancel`, `cancel_older_than`, `gc`, `history`.
- `vm.service.messages`: TypedDicts of every request and envelope.

The public interface is the modules in PUBLIC_MODULES below (a name ending in `.*` stands for
the package and every module in it), and in them only names without a leading underscore:

- `vm`: the embedding API above, `__version__`, and `install_hint` (the one way a message
  names an extra to install);
- `vm.core.*`: the vocabulary every layer shares (JavaScript values, conditions, the input
  schema dialect, sources and spans, the code table, bounds);
- `vm.isa.*`: the instruction set a compiler targets (opcodes, payloads, Program, Frame,
  codec, verifier, disassembler, cost);
- `vm.host.commands.*`: the pipeline commands' signatures; `vm.host.store`: the store
  interface (the compile cache lives in it);
- `vm.engine.refs`, `vm.engine.steps`: the reference syntax and step results a compiler
  plans with;
- `vm.service.frontend` (the compiler interface), `vm.service.migrate`, `vm.service.admin`,
  `vm.service.messages`, `vm.service.protocol` (its package names: the embedding API);
- `vm.cli.main`: `main(argv, frontend)`, the `lobster` command.

Everything else (the interpreter, processes, the store's backends, the protocol's modules,
the CLI's subcommand modules) may change without notice. The compiler (`lobsterc`) imports
only this interface; tests/machine/test_layering.py holds it to that, and holds each layer
(core < isa < host < engine < service < cli) to importing only the layers below it.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (30 modules)

__version__ = "0.1.0"

PUBLIC_MODULES = (
    "vm", "vm.core.*", "vm.isa.*", "vm.host.commands.*", "vm.host.store", "vm.engine.refs",
    "vm.engine.steps", "vm.service.frontend", "vm.service.migrate", "vm.service.admin",
    "vm.service.messages", "vm.service.protocol", "vm.cli.main",
)

_EXPORTS = {
    "DISTRIBUTION": "vm.core.distribution", "install_hint": "vm.core.distribution",
    "handle": "vm.service.protocol.request", "run": "vm.service.protocol.running",
    "resume": "vm.service.protocol.resuming", "Options": "vm.service.protocol.options",
    "Decision": "vm.service.protocol.resuming", "RequestError": "vm.service.protocol.envelope",
    "Scope": "vm.host.children", "open_store": "vm.host.store", "StateStore": "vm.host.store",
    "history": "vm.service.admin",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # what a type checker reads; at run time each is loaded on first use below
    from vm.core.distribution import DISTRIBUTION as DISTRIBUTION, install_hint as install_hint
    from vm.host.children import Scope as Scope
    from vm.host.store import StateStore as StateStore, open_store as open_store
    from vm.service.admin import history as history
    from vm.service.protocol.envelope import RequestError as RequestError
    from vm.service.protocol.options import Options as Options
    from vm.service.protocol.request import handle as handle
    from vm.service.protocol.resuming import Decision as Decision, resume as resume
    from vm.service.protocol.running import run as run
else:
    def __getattr__(name: str) -> object:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'vm' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
