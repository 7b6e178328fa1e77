"""A fork server for the crash matrix: import tether once, fork one worker process per request.

Starting a Python worker costs about 0.3 s (mostly imports); the crash matrices
start several hundred of them. This server imports :mod:`worker` (and what
building its agents imports) once and forks a child per request instead. Each
child is a real, separate process: it reopens the store, reads ``TETHER_CRASH_AT`` again (the hook reads it at import, so
the child reloads :mod:`tether._loop.crash` after setting it) and, at the point,
SIGKILLs itself exactly as a freshly started worker would.

Protocol, one JSON object per line: the request ``{"argv": [...],
"crash_at": str | null, "out": path, "err": path}`` on stdin; the reply
``{"pid": int, "returncode": int}`` on stdout once the child has ended (a
negative code is the signal that ended it, as with :mod:`subprocess`).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import worker

import tether._loop.crash


def child(request: dict[str, Any]) -> None:
    """Become one worker process; never returns."""
    code = 3
    try:
        for fd, path in ((1, request["out"]), (2, request["err"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        os.environ.pop("TETHER_CRASH_AT", None)
        if request.get("crash_at"):
            os.environ["TETHER_CRASH_AT"] = request["crash_at"]
        importlib.reload(tether._loop.crash)  # the loop's crash_point reads this module's globals
        code = asyncio.run(worker.main_async(worker.parse_args(request["argv"])))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def warm_up() -> None:
    """Import what every worker needs before the first fork: the SQLite store, and pydantic
    (imported when the first tool's schema is built, ~0.3 s a worker otherwise)."""
    import tether.stores.sqlite  # noqa: F401

    worker.build_agent(None, worker.Oracle(os.devnull), worker.Ledger())


def serve() -> None:
    warm_up()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"pid": pid, "returncode": code}), flush=True)


if __name__ == "__main__":
    serve()
