"""Embedding Lobster in Python, with the imports docs/embedding.md writes. A type checker sees
the real signatures and the TypedDict envelopes: CI runs `mypy --strict --disallow-any-expr`
over this file (tests/typing/test_mypy.py), and runs it.

    python examples/embed_typed.py [WORKDIR]     # a temporary directory if not given
"""

from __future__ import annotations

import sys
import tempfile

from vm import Decision, Options, RequestError, handle, resume, run
from vm.service.messages import Envelope, ErrorEnvelope, Json

PIPELINE = "exec --json --shell 'echo [1,2]' | approve --prompt 'Send these?'"


def items(envelope: Envelope) -> list[Json]:
    """The output of a run that ended; a refusal or an unanswered halt is an error here."""
    if not envelope["ok"]:
        error = envelope["error"]
        raise SystemExit(f"{error.get('code', '')}: {error['message']}")
    if envelope["status"] != "ok":
        raise SystemExit(f"the run stopped at {envelope['status']}")
    return envelope["output"]


def refuse(pipeline: str) -> ErrorEnvelope | None:
    """A gateway's own check before it hands a call on, answered as Lobster answers one."""
    if not pipeline.strip():
        return RequestError("pipeline is empty").envelope
    return None


def main(work: str) -> list[Json]:
    options = Options(cwd=work, state_dir=f"{work}/state")  # or "postgresql://..."
    refused = refuse("")
    assert refused is not None and refused["error"]["code"] == "E001"

    # one tool call in, its envelope out; the halt answered through the same door
    envelope = handle({"action": "run", "pipeline": PIPELINE}, options)
    if envelope["ok"] and envelope["status"] == "needs_approval":
        token = envelope["requiresApproval"]["resumeToken"]
        envelope = handle({"action": "resume", "token": token, "approve": True}, options)
    first = items(envelope)

    # the same as keyword calls
    halted = run(PIPELINE, options)
    if halted["ok"] and halted["status"] == "needs_approval":
        halted = resume(options, Decision(approve=True),
                        token=halted["requiresApproval"]["resumeToken"])
    return first + items(halted)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as work:
            print(main(work))
