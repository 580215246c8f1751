"""`lobsterc diff` itself: its arguments, the two versions (checked out from git for `--rev`),
compile errors as text or code-scanning output, the report in the chosen format, the exit code."""

from __future__ import annotations

import os
from typing import Any

import attrs

from lobsterc.tools.diff.compare import compare
from lobsterc.tools.diff.render import RENDERERS
from lobsterc.tools.diff.versions import Compile, RevError, checkout_rev, load_version


def _at_rev(d: Any, tmp: str, rev: str | None) -> tuple[Any, Any, Any]:
    """A compile error of a version: as text shows it, with its Source, and as code scanning
    shows it. A file git wrote under `tmp` is named `REV:path` in text, and is the repository
    path with the revision in the message for code scanning (never the temporary checkout)."""
    from lobsterc.syntax.source import Source
    from vm.core.source import file_name

    if rev is None or d.span is None:
        return d, None, d
    for side, name in zip("ab", rev.split("..", 1)):
        root = file_name(os.path.join(tmp, side)) + os.sep  # as spans name files: resolved
        if name and d.span.source.startswith(root):
            with open(d.span.source, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            path = d.span.source[len(root):].replace(os.sep, "/")
            shown = attrs.evolve(d, span=attrs.evolve(d.span, source=f"{name}:{path}"))
            scanned = attrs.evolve(d, span=attrs.evolve(d.span, source=path),
                                   message=f"{d.message} (at revision {name})")
            return shown, Source(f"{name}:{path}", text), scanned
    return d, None, d


FORMATS = ("text", "json", "markdown", "sarif", "github")


def run_diff(files: list[str], *, compile: Compile, rev: str | None = None, fmt: str = "text",
             accept: tuple[str, ...] = (), out: Any = None, err: Any = None) -> int:
    """The `lobsterc diff` command: 0 no weakening (or all accepted), 1 a safety property
    weakened or a version does not compile, 2 usage error. `compile` reads one version
    (path -> (Program, text)): the command line passes its compile_target."""
    import sys
    import tempfile

    from lobsterc.diagnostics import CompileError, render

    out = out or sys.stdout
    err = err or sys.stderr
    if rev is not None:
        if len(files) != 1 or ".." not in rev or not rev.split("..", 1)[0]:
            err.write("usage: lobsterc diff --rev A..B PATH (B empty: the working tree)\n")
            return 2
    elif len(files) != 2:
        err.write("usage: lobsterc diff OLD NEW | lobsterc diff --rev A..B PATH\n")
        return 2
    accept = tuple(a.strip() for item in accept for a in item.split(",") if a.strip())
    with tempfile.TemporaryDirectory(prefix="lobsterc-diff-") as tmp:
        try:
            if rev is None:
                versions = [(files[0], files[0]), (files[1], files[1])]
            else:
                a, b = rev.split("..", 1)
                versions = [checkout_rev(a, files[0], os.path.join(tmp, "a"))]
                versions.append(checkout_rev(b, files[0], os.path.join(tmp, "b")) if b
                                else (files[0], files[0]))
            for path, _ in versions:
                if not os.path.isfile(path):
                    what = "Is a directory" if os.path.isdir(path) else "No such file"
                    err.write(f"lobsterc: {what}: {path}\n")
                    return 2
            models = []
            for path, shown in versions:
                try:
                    models.append(load_version(path, shown, compile=compile))
                    if shown != path:
                        models[-1].rev = shown.split(":", 1)[0]
                except CompileError as exc:
                    found = [_at_rev(d, tmp, rev) for d in exc.diagnostics]
                    err.write(f"lobsterc: {shown} does not compile:\n")
                    err.writelines(render(d, source) + "\n" for d, source, _ in found)
                    if fmt in ("sarif", "github"):  # what code scanning reads: the errors
                        from lobsterc.tools.sarif import lint_github, lint_sarif

                        lint = lint_sarif if fmt == "sarif" else lint_github
                        out.write(lint([(path, d) for _, _, d in found]))
                    return 1
        except RevError as exc:
            err.write(f"lobsterc: --rev {rev}: {exc}\n")
            return 2
        report = compare(models[0], models[1], accept)
    if fmt == "sarif":
        from lobsterc.tools.sarif import diff_sarif
        out.write(diff_sarif(report))
    elif fmt == "github":
        from lobsterc.tools.sarif import diff_github
        out.write(diff_github(report))
    else:
        out.write(RENDERERS[fmt](report))
    return report.exit_code
