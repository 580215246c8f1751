"""Envelopes: the `ok` and error answers of every request, the CLI's exit status for one, and
`RequestError`, a refusal that carries its envelope. An error's `type` is its code's, from
the code table (vm/core/codes.py); each refusal more than one place makes is written here once."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol, cast

from vm.core import codes, json_read, json_write

if TYPE_CHECKING:
    from vm.service.messages import ErrorEnvelope

PROTOCOL_VERSION = 1


def ok_envelope(status: str, output: list[Any], approval: dict[str, Any] | None = None,
                input_request: dict[str, Any] | None = None) -> dict[str, Any]:
    """An `ok: true` envelope (`vm.service.messages.OkEnvelope`)."""
    return {"protocolVersion": PROTOCOL_VERSION, "ok": True, "status": status, "output": output,
            "requiresApproval": approval, "requiresInput": input_request}


def as_json_data(envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope as its JSON carries it, for whoever takes it as Python objects: an
    embedder (`handle`, `run`, `resume`, `admin.resume_by_id`), `lobster mcp`'s structured
    content (through `handle`), the halt a terminal asks about. A property JavaScript holds as
    undefined (a field `pick` set that an item lacks) is left out, an undefined array item is
    null. A run's envelope keeps its undefined (`drive`): the CLI writes it with our JSON
    writer, which leaves it out as JSON.stringify does, so its paths (`run_js`, `resume_js`,
    `handle_js`) skip this. The envelope itself when it holds none, as nearly all do:
    msgpack's packer (in C) tells, the whole envelope packed once (about 7 ms for 10 MB of
    output), and the walk is done only when it refuses."""
    import msgpack

    try:
        msgpack.packb(envelope)
    except Exception:  # noqa: BLE001 - undefined, or anything else it cannot hold: the walk decides
        cleaned: dict[str, Any] = json_write.without_undefined(envelope)
        return cleaned
    return envelope


def error_envelope(code: str, message: str, location: dict[str, Any] | None = None,
                   detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """An `ok: false` envelope (`vm.service.messages.ErrorEnvelope`): its `type` is the one
    the code table gives `code`. `detail` (additive: the message stays the original's) holds
    what helps fix the input: a JSON position, an excerpt, the allowed values."""
    error: dict[str, Any] = {"type": codes.envelope_type(code), "message": message, "code": code}
    if location:
        error["location"] = location
    if detail:
        error["detail"] = detail
    return {"protocolVersion": PROTOCOL_VERSION, "ok": False, "error": error}


def exit_code(envelope: dict[str, Any]) -> int:
    """The CLI's exit status for an envelope: 0 ok (any status), 1 runtime error, 2 parse error."""
    if envelope.get("ok"):
        return 0
    return 2 if envelope["error"]["type"] == "parse_error" else 1


class RequestError(Exception):
    """A refused request: its error envelope (E001, a bad request, unless said otherwise)."""

    def __init__(self, message: str, code: str = "E001", location: dict[str, Any] | None = None,
                 detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.envelope = cast("ErrorEnvelope", error_envelope(code, message, location, detail))


def internal_error(exc: BaseException) -> dict[str, Any]:
    """The envelope of an exception nothing else caught: a bug of ours. It is raised before a
    checkpoint is claimed or after its claim is recorded, so nothing is silently consumed (a
    claimed checkpoint reads as in doubt, T432)."""
    return error_envelope("T498", codes.internal_error_message(exc))


def store_error(exc: Exception) -> dict[str, Any]:
    """The store could not be reached, read or written, or its key set cannot be used
    (T451, T452): nothing was claimed or consumed."""
    return error_envelope(getattr(exc, "code", "T450"), str(exc))


# refusals made in more than one place -------------------------------------------------------
def too_deep(what: str) -> RequestError:
    """JSON text nested past json_read.MAX_JSON_DEPTH (E007)."""
    return RequestError(f"{what} is nested deeper than {json_read.MAX_JSON_DEPTH} levels", "E007")


def not_unicode(what: str) -> RequestError:
    """Text holding a lone UTF-16 surrogate (E009)."""
    return RequestError(f"{what} holds a lone UTF-16 surrogate, which is not Unicode text",
                        "E009")


def check_unicode(value: Any, what: str) -> None:
    """Refuse a string holding a lone UTF-16 surrogate (JSON's `\\ud83d` alone): it is not
    Unicode text, and could be neither run nor stored."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise not_unicode(what) from None
    except RecursionError:
        raise too_deep(what) from None


def unknown_field(name: Any, action: str, known: list[str], hint: str = "") -> RequestError:
    """A field the action does not take, by name (E008); a long name is not echoed whole."""
    shown = name if isinstance(name, str) and len(name) <= 64 else f"{str(name)[:64]}..."
    return RequestError(f"unknown field {shown!r} in a {action} request{hint}; {action} takes: "
                        f"{', '.join(known) or 'no fields'}", "E008")


def unknown_approval_id(approval_id: str, code: str = "E503") -> RequestError:
    """The refusal of an approval id that names nothing (E503), or no longer does: its
    checkpoint ended (E505, in the original's words). A long one is not echoed back whole (an
    id is 8 hex digits; what a caller sent by mistake can be anything, of any size)."""
    shown = approval_id if len(approval_id) <= 40 else \
        f"{approval_id[:16]}... ({len(approval_id)} characters)"
    return RequestError(f'Approval ID "{shown}" not found or expired', code)


def store_unwritable(location: str, exc: OSError) -> str:
    """Why a store cannot take a write (T450): the state dir is a file, read-only, full..."""
    return f"The state store at {location} cannot be written: {exc.strerror or exc}"


class Capped(Protocol):
    """What the size check reads of a run's settings (options.Settings has it)."""

    @property
    def max_stdout_bytes(self) -> int | None: ...


def check_envelope_size(envelope: dict[str, Any], settings: Capped) -> None:
    """An envelope over the call's maxStdoutBytes is refused (T423)."""
    cap = settings.max_stdout_bytes
    if cap is not None and json_write.json_pretty_size(envelope) > cap:
        raise RequestError("lobster runtime result exceeded maxStdoutBytes", "T423")
