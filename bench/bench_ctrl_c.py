"""Seconds from Ctrl-C to exit in ``tether run`` on the offline model (never run by the test suite).

    python bench/bench_ctrl_c.py [--runs N] [--against OTHER_SRC] [--wait SECONDS]

Starts ``tether run`` under a pseudo-terminal with a task that makes the
default 1.5B write a long story, presses Ctrl-C ``--wait`` seconds after the
model starts thinking, and measures how long until the "stopping…" line and
until the process exits. With ``--against`` (another checkout's ``src``, e.g.
the code before the change) the two are run one after the other, alternating,
and the ratio is printed; each run is capped at 180 s. Prints the load average,
since a shared machine's seconds mean little alone. Needs ``tether[local]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pexpect

SRC = str(Path(__file__).resolve().parents[1] / "src")
TASK = "Write a long story, at least 400 words, about a lighthouse keeper. Do not use any tool."
CAP = 180.0


def one(src: str, wait: float) -> tuple[float, float]:
    """(seconds to "stopping…" or -1, seconds to exit) for one run with the code in ``src``."""
    work = Path(tempfile.mkdtemp(prefix="ctrlc-"))
    (work / "home").mkdir()
    (work / "ws").mkdir()
    env = {**os.environ, "PYTHONPATH": src, "TERM": "xterm", "HOME": str(work / "home")}
    env["TETHER_CACHE"] = os.environ.get("TETHER_CACHE") or str(Path.home() / ".cache" / "tether")
    tether = str(Path(sys.executable).parent / "tether")
    child = pexpect.spawn(tether, ["run", TASK], cwd=str(work / "ws"), env=env, encoding="utf-8", timeout=300)
    try:
        child.expect_exact("is thinking")
        time.sleep(wait)
        child.sendintr()
        pressed = time.monotonic()
        said = -1.0
        if child.expect_exact(["stopping", pexpect.EOF, pexpect.TIMEOUT], timeout=CAP) == 0:
            said = time.monotonic() - pressed
        child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=max(1.0, CAP - (time.monotonic() - pressed)))
        return said, time.monotonic() - pressed
    finally:
        child.close(force=True)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--against", metavar="OTHER_SRC")
    parser.add_argument("--wait", type=float, default=3.0)
    args = parser.parse_args()
    trees = {"this": SRC, **({"against": args.against} if args.against else {})}
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, src in trees.items():  # alternating, so both see the same machine
            seen[name].append(one(src, args.wait))
            print(f"{name:8}  stopping… after {seen[name][-1][0]:6.2f} s   exit after {seen[name][-1][1]:6.2f} s")
    for name, rows in seen.items():
        exits = sorted(r[1] for r in rows)
        print(f"{name:8}  median exit after Ctrl-C: {exits[len(exits) // 2]:.2f} s over {len(rows)} run(s)")
    if args.against:
        mine, base = (sorted(r[1] for r in seen[n])[len(seen[n]) // 2] for n in ("this", "against"))
        print(f"ratio this/against: {mine / base:.3f} (exit capped at {CAP:.0f} s)")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
