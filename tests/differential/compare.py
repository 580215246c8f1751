"""Both CLIs over one case, and the first step where they part, explained or not."""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from . import allowlist, known
from .harness import run_case
from .normalise import comparable, differences

ENV_REFERENCE = "LOBSTER_REFERENCE"


def reference_command() -> tuple[list[str] | None, str]:
    """The original's CLI argv prefix, or None and the reason it cannot run here."""
    path = os.environ.get(ENV_REFERENCE)
    if not path:
        return None, (f"{ENV_REFERENCE} is not set (point it at the original's bin/lobster; "
                      ".ci/run installs @clawdbot/lobster@2026.9.13 from npm)")
    if not shutil.which("node"):
        return None, "node is not on PATH, so the original Lobster cannot run"
    if not os.access(path, os.X_OK):
        return None, f"{ENV_REFERENCE}={path} is not an executable"
    return [path], ""


def our_command() -> list[str]:
    return [str(Path(sys.executable).parent / "lobster")]


@attrs.frozen
class Outcome:
    """The two runs of a case, and the first step where they differ (None when they agree)."""
    case: dict
    ref: list
    ours: list
    step: int | None
    fields: tuple
    explained_by: object = None

    @property
    def agrees(self) -> bool:
        return self.step is None

    def report(self) -> str:
        i = self.step
        lines = [f"divergence at step {i} in {', '.join(self.fields)}",
                 f"argv: {self.ours[i]['argv']}"]
        a, b = comparable(self.ref[i]), comparable(self.ours[i])
        for f in self.fields:
            lines.append(f"  original {f}: {_short(a.get(f))}")
            lines.append(f"  ours     {f}: {_short(b.get(f))}")
        return "\n".join(lines)


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) < 600 else text[:600] + "..."


def run_both(case: dict, ref_cmd: list[str], our_cmd: list[str] | None = None) -> Outcome:
    """Runs `case` through both CLIs, at the same time (each run has its own root and
    server, and is mostly waiting on its processes). After the first differing step the later
    steps are consequences of it and are not compared."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        ref_run = pool.submit(run_case, case, ref_cmd)
        ours = run_case(case, our_cmd or our_command())
        ref = ref_run.result()
    for i, (a, b) in enumerate(zip(ref, ours)):
        fields = tuple(differences(a, b))
        if fields:
            entry = allowlist.explain(case, i, a, b) or known.explain(case, i, a, b)
            return Outcome(case, ref, ours, i, fields, entry)
    return Outcome(case, ref, ours, None, ())
