"""Helper process for the commit-durability test (test_durability.py).

``python _killer.py DB DURABILITY`` reads trials from stdin, one per line, and
answers each with a JSON line on stdout. It is single-threaded, so it can fork
a fresh child per trial cheaply and safely; it never holds a database
connection across a fork.

* ``self N``: the child opens the store, appends a batch of 3 events to run
  ``sN``, writes an acknowledgement byte to a pipe the moment ``append``
  returns, then SIGKILLs itself.
* ``external N DELAY_US``: the child appends batches to run ``xN`` as fast as
  it can, acknowledging each; this process kills it after ``DELAY_US``.

After each kill this process opens the database again and reports how many
batches were acknowledged and how many events it finds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Coroutine
from typing import Any

from tether import ToolCall, ToolStarted
from tether.stores.sqlite import SQLiteStore


def done(coro: Coroutine[Any, Any, Any]) -> Any:
    """Drive a store coroutine that never awaits (the SQLite store's methods don't)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("the store awaited something")


def batch(run_id: str, n: int) -> list[Any]:
    call = ToolCall.of("charge", {"run": run_id, "n": n}, id=f"call_{n}")
    return [ToolStarted(call), ToolStarted(call, 2), ToolStarted(call, 3)]


def child(db: str, durability: Any, run_id: str, ack: int, forever: bool) -> None:
    try:
        store = SQLiteStore(db, durability=durability)
        seq, n = 0, 0
        while True:
            seq = done(store.append(run_id, batch(run_id, n), expected_seq=seq))
            os.write(ack, b"1")
            if not forever:
                os.kill(os.getpid(), signal.SIGKILL)
            n += 1
    except BaseException:
        traceback.print_exc()
    os._exit(3)  # only reached on an error: the test sees exit 3, not SIGKILL


def trial(db: str, durability: str, words: list[str]) -> dict[str, Any]:
    mode, n = words[0], int(words[1])
    run_id = f"{mode[0]}{n}"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(db, durability, run_id, w, forever=mode == "external")
    os.close(w)
    if mode == "external":
        time.sleep(int(words[2]) / 1e6)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    acked = len(_read_all(r))
    os.close(r)
    store = SQLiteStore(db, durability=durability)  # type: ignore[arg-type]
    found = len(done(store.load(run_id)))
    store.close()
    return {"run": run_id, "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "acked": acked, "found": found}  # fmt: skip


def _read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 65536):
        out += chunk
    return out


def main() -> None:
    db, durability = sys.argv[1], sys.argv[2]
    SQLiteStore(db, durability=durability).close()  # type: ignore[arg-type]  # create and migrate
    for line in sys.stdin:
        print(json.dumps(trial(db, durability, line.split())), flush=True)


if __name__ == "__main__":
    main()
