"""Two workers, kill -9 and a database that keeps dropping them: the soak of tests/dispatch/chaos.py, larger.

Two ``tether worker`` processes (the Procrastinate queue and the sweeper) advance
N runs of the durability suite's plans on the PostgreSQL at ``TETHER_PG_DSN``;
meanwhile every 0.2-0.6 s every backend of the workers is terminated
(``pg_terminate_backend``, what a restart or a failover does to clients) and now
and then a worker is killed with SIGKILL. Reports the runs lost, the ``once``
effects doubled (the durability judge's problems), runs advanced by two workers
at once, and how often a worker exited by itself (each is started again so the
soak ends). Nothing here is a test; tests/dispatch/test_database_goes_away.py
runs the same with N=40.

Run: PYTHONPATH=src:tests python bench/bench_workers_chaos.py [--runs 200] [--kills 6] [--rounds 60] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests")]

from dispatch.chaos import chaos_soak  # noqa: E402
from durability.conftest import fresh_schema  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--kills", type=int, default=6)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--seed", type=int, default=random.randrange(2**31))
    p.add_argument("--concurrency", type=int, default=6)
    args = p.parse_args()
    store, queue = fresh_schema("tether_s"), fresh_schema("tether_q")
    try:
        with tempfile.TemporaryDirectory() as root:
            report = chaos_soak(Path(root), next(store), next(queue), args.runs, kills=args.kills,
                                rounds=args.rounds, seed=args.seed, concurrency=args.concurrency, delay=0.1,
                                every=0.6, budget=1200)  # fmt: skip
    finally:
        for gen in (store, queue):
            gen.close()  # drops the schema
    print(f"seed {args.seed}: {report.line()}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} cores")
    for log in report.exits[:3]:
        print("--- a worker exited:\n" + log)
    for problem in [*report.problems, *report.twice][:20]:
        print("problem:", problem)


if __name__ == "__main__":
    main()
