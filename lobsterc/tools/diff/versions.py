"""Reading the versions a diff compares: a file compiled into its Model (with the `effects:`
marks and the `x-reviewed:` ids of a workflow file), or a file and its sub-workflows as they are
at a git revision."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from lobsterc.tools.diff.model import Model, build_model

Compile = Callable[[str], tuple[Any, Any]]
"""How a diff compiles a version: path -> (its vm Program, anything). The command passes
lobsterc.tools.cli.compile_target; diff imports no command line."""


def load_version(path: str, shown: str | None = None, *, compile: Compile) -> Model:
    """Compile one version (a workflow file, a .pipeline or a .lbc) with `compile` into its
    Model. `shown` is how findings name the file (default: `path`). Raises CompileError."""
    from vm.service.frontend import WORKFLOW_EXTENSIONS

    program, _ = compile(path)
    marks: dict[str, str] = {}
    reviewed: tuple[str, ...] = ()
    if path.lower().endswith(WORKFLOW_EXTENSIONS):
        from lobsterc.check.checker import check_file
        from lobsterc.tools.lint import step_index

        loaded, _ = check_file(path, lenient=True)
        if loaded.workflow is not None:
            marks = {label: ref.step.effects for label, ref in
                     step_index(loaded.workflow, "", ()).items()
                     if isinstance(ref.step.effects, str)}
        reviewed = reviewed_ids(path)
    return build_model(program, shown or path, marks=marks, reviewed=reviewed)


def reviewed_ids(path: str) -> tuple[str, ...]:
    """The finding ids a workflow file accepts in its top-level `x-reviewed:` key (a list of
    ids, or a mapping of id -> the reviewer's note)."""
    from lobsterc.load import load_document

    data = load_document(path).data
    value = data.get("x-reviewed") if isinstance(data, dict) else None
    if isinstance(value, dict):
        return tuple(str(k) for k in value)
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    if isinstance(value, str):
        return (value,)
    return ()


class RevError(Exception):
    """A `--rev` that git cannot read (not a repository, unknown revision, no such path)."""


def _git(cwd: str, *args: str) -> bytes:
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except OSError as exc:
        raise RevError(f"cannot run git: {exc.strerror}") from None
    if done.returncode != 0:
        what = done.stderr.decode("utf-8", "replace").strip()
        if not what and "--verify" in args:
            what = f"unknown revision: {args[-1].removesuffix('^{commit}')}"
        raise RevError(what or f"git {args[0]} failed")
    return done.stdout


def resolve_rev(top: str, rev: str) -> str:
    """The commit id `rev` names, checked by `git rev-parse --verify --end-of-options`, so a
    revision such as `--output=FILE` is a name git cannot find, never an option it obeys."""
    found = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    commit = found.decode("ascii", "replace").strip()
    if not commit or commit.startswith("-"):
        raise RevError(f"unknown revision: {rev}")
    return commit


def checkout_rev(rev: str, path: str, into: str) -> tuple[str, str]:
    """Write `path` as it is at `rev` (its blob read with `git show REV:PATH`), and every
    sub-workflow it calls, into the directory `into`, mirroring the repository layout.
    Returns (the written path, the name findings show: `REV:path`)."""
    from lobsterc.check.checker import check_file
    from lobsterc.tools.lint import walk
    from lobsterc.syntax import ast

    where = os.path.dirname(os.path.abspath(path)) or "."
    top = _git(where, "rev-parse", "--show-toplevel").decode().strip()
    rel = os.path.relpath(os.path.realpath(os.path.abspath(path)), os.path.realpath(top))
    rel = rel.replace(os.sep, "/")
    commit = resolve_rev(top, rev)
    todo, done = [rel], set()
    while todo:
        name = todo.pop()
        if name in done or name.startswith("../"):
            continue
        done.add(name)
        blob = _git(top, "show", f"{commit}:{name}")  # a hex id: never read as an option
        target = os.path.join(into, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(blob)
        if not name.lower().endswith((".lobster", ".yaml", ".yml", ".json")):
            continue
        try:
            loaded, _ = check_file(target, lenient=True)
        except Exception:  # noqa: BLE001 - the compile that follows reports the problem
            continue
        if loaded.workflow is None:
            continue
        for _, step in walk(loaded.workflow.steps):
            if isinstance(step.kind, ast.SubWorkflow) and "$" not in step.kind.target:
                callee = os.path.normpath(os.path.join(os.path.dirname(name),
                                                       step.kind.target)).replace(os.sep, "/")
                todo.append(callee)
    return os.path.join(into, *rel.split("/")), f"{rev}:{rel}"
