"""The original's own test suite (`dist/test/*.test.js` of @clawdbot/lobster@2026.9.13), ported
to differential cases that run live through both CLIs.

Each test the original ships is either ported (one or more cases, named `<file>::<test>`) or
listed as not portable with the reason. The ports are written for this project: the original's
tests are read as evidence of behaviour, and each case states that behaviour as a CLI run
(`node -e` fixtures become `printf`/`sh`, internal API calls become the run that shows them).

`tests/oracle/test_ported.py` runs every case against both engines; `compat_report.py` writes
COMPAT.md from the same data.
"""

from .suite import NOT_PORTABLE, PORTED, Port, test_names  # noqa: F401
