"""The service under abuse (issue 24 item 5): each test here failed on main 25e1501."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import LOBSTER


def test_tool_refuses_a_request_that_is_not_utf8(cli):
    marker = cli.work / "ran"
    request = json.dumps({"action": "run", "pipeline": f"exec --shell 'touch {marker}' X"})
    data = request.encode().replace(b"X", b"\xff\xfe")
    proc = subprocess.run([LOBSTER, "tool", "-"], cwd=cli.work, env=cli.env, input=data,
                          capture_output=True, timeout=60)
    refused = json.loads(proc.stdout)
    assert (proc.returncode, refused["error"]["code"]) == (2, "E009")
    assert "UTF-8" in refused["error"]["message"]
    assert not marker.exists()
