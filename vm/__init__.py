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
"""

__version__ = "0.1.0"

_EXPORTS = {
    "handle": "vm.service.protocol", "run": "vm.service.protocol", "resume": "vm.service.protocol",
    "Options": "vm.service.protocol", "Decision": "vm.service.protocol", "RequestError": "vm.service.protocol",
    "Scope": "vm.host.children", "open_store": "vm.host.store", "StateStore": "vm.host.store",
    "history": "vm.service.admin",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
