"""`lobsterc lsp`: a language server for workflow files and pipelines, over stdio. `analysis`
answers the questions (plain data, no LSP library); `server` speaks the protocol (pygls, the
optional `[lsp]` extra, imported only here and only when the server starts)."""

from __future__ import annotations

import sys

from vm import install_hint

INSTALL_HINT = "lobsterc lsp needs the lsp extra: " + install_hint("lsp")


def main(*, require_approval: bool = False, strict: bool = False) -> int:
    """Serve on stdin/stdout until the client exits; 2 with a one-line hint without pygls."""
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError:
        sys.stderr.write(INSTALL_HINT + "\n")
        return 2
    from lobsterc.tools.lsp.server import serve

    serve(require_approval=require_approval, strict=strict)
    return 0
