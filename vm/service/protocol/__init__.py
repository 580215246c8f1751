"""The tool protocol, as the gateway embeds it and the CLI prints it: tool requests in,
envelopes out. One module per job, each importing only those before it:

- `envelope`: the envelopes, `RequestError`, the exit status of an envelope;
- `options`: `Options` (set once per process) and `Settings` (one run's), checkpoint TTLs
  and the other durations read from the environment;
- `park`: a halted run saved, and its envelope with the token;
- `running`: `run`: compile, start, drive to the end, a halt or a trap;
- `checkpoint`: a parked checkpoint loaded and checked, cancelled, or explained;
- `resuming`: `resume`: a decision checked, the checkpoint claimed, the run stepped on;
- `request`: the fields of each action, and `handle`.

The names below are the embedding API (also exported from `vm`), each loaded on first use;
the rest is each module's own. The envelopes `run`, `resume` and `handle` return are JSON data
(`envelope.as_json_data`); the CLI calls `run_js`, `resume_js` and `handle_js`, whose envelopes
keep a value's undefined for its JSON writer to leave out.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (30 modules)

_EXPORTS = {
    "PROTOCOL_VERSION": "envelope", "RequestError": "envelope", "exit_code": "envelope",
    "DEFAULT_MAX_STDOUT_BYTES": "options", "DEFAULT_TIMEOUT_MS": "options",
    "Options": "options", "Settings": "options",
    "MAX_PIPELINE_BYTES": "running", "run": "running",
    "Decision": "resuming", "resume": "resuming",
    "MAX_REQUEST_BYTES": "request", "REQUEST_FIELDS": "request", "REQUIRED_FIELDS": "request",
    "handle": "request",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what a type checker reads; at run time each is loaded on first use below
    from vm.service.protocol.envelope import (PROTOCOL_VERSION as PROTOCOL_VERSION,
                                              RequestError as RequestError, exit_code as exit_code)
    from vm.service.protocol.options import (DEFAULT_MAX_STDOUT_BYTES as DEFAULT_MAX_STDOUT_BYTES,
                                             DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS,
                                             Options as Options, Settings as Settings)
    from vm.service.protocol.request import (MAX_REQUEST_BYTES as MAX_REQUEST_BYTES,
                                             REQUEST_FIELDS as REQUEST_FIELDS,
                                             REQUIRED_FIELDS as REQUIRED_FIELDS, handle as handle)
    from vm.service.protocol.resuming import Decision as Decision, resume as resume
    from vm.service.protocol.running import MAX_PIPELINE_BYTES as MAX_PIPELINE_BYTES, run as run
else:
    def __getattr__(name: str) -> object:
        """Each name is loaded on first use: the CLI's `--help` and an envelope's exit status
        never load the machine."""
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
