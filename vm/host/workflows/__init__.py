"""Built-in named workflows (`workflows.list`, `workflows.run`): the ones the original
ships, with the same names, arguments and results, described in this project's words."""

from __future__ import annotations

from typing import Any

_REPO = {"type": "string", "description": "the repository as owner/name"}
_PR = {"type": "number", "description": "the pull request's number"}
_KEY = {"type": "string", "description": "state key for the last snapshot "
        "(default github.pr:<repo>#<pr>)"}
_EXAMPLE_ARGS = {"repo": "openclaw/openclaw", "pr": 1152}

WORKFLOWS: dict[str, dict[str, Any]] = {
    "github.pr.monitor": {
        "name": "github.pr.monitor",
        "description": "Read a pull request with gh, compare it with the snapshot kept from "
                       "the last run, and report what changed.",
        "argsSchema": {
            "type": "object",
            "properties": {
                "repo": _REPO, "pr": _PR, "key": _KEY,
                "changesOnly": {"type": "boolean",
                                "description": "when nothing changed, report only that"},
                "summaryOnly": {"type": "boolean",
                                "description": "return the change summary and a few PR fields "
                                               "instead of the whole snapshot"},
            },
            "required": ["repo", "pr"],
        },
        "examples": [{"args": _EXAMPLE_ARGS,
                      "description": "Report the pull request's changes since the last run."}],
        "sideEffects": [],
    },
    "github.pr.monitor.notify": {
        "name": "github.pr.monitor.notify",
        "description": "Watch a pull request and produce one readable line when it has "
                       "changed since the last run.",
        "argsSchema": {
            "type": "object",
            "properties": {"repo": _REPO, "pr": _PR, "key": _KEY},
            "required": ["repo", "pr"],
        },
        "examples": [{"args": _EXAMPLE_ARGS,
                      "description": "A \"PR updated\" line, only when something changed."}],
        "sideEffects": [],
    },
}


def listing() -> list[dict]:
    return [{k: w[k] for k in ("name", "description", "argsSchema", "examples", "sideEffects")}
            for w in WORKFLOWS.values()]
