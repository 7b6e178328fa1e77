"""schemathesis against ``/openapi.json`` with a token: no 5xx, and every response matches the document.

The two event-stream operations never end by design, so they are left to
``test_api.py``; everything else is fuzzed (positive and negative data, and
stateful sequences that start runs and then act on them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import Served

CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    )
)


def test_the_api_holds_to_its_openapi_document_under_fuzzing(sqlite_served: Served) -> None:
    exe = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    out = subprocess.run(
        [
            exe,
            "run",
            f"{sqlite_served.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {sqlite_served.token}",
            "--checks",
            CHECKS,
            "--exclude-path-regex",
            "/(stream|changes)$",
            "--max-examples",
            "25",
            "--request-timeout",
            "10",
            "--seed",
            "20261201",
            "--generation-database",
            "none",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=sqlite_served.home,  # its cache directory stays out of the checkout
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "passed" in out.stdout and "failed" not in out.stdout.split("SUMMARY")[-1]
    assert sqlite_served.proc is not None and sqlite_served.proc.poll() is None  # still serving
