"""A server that dies (kill -9) or stops (SIGTERM) mid-run: the next one finishes the run, no `once` call repeated."""

from __future__ import annotations

import time

from .conftest import Served, start, wait_run


def wait_for_oracle(served: Served, entry: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(line[0] == "waiting" and line[1] == entry for line in served.oracle_lines()):
        assert time.monotonic() < deadline, f"the run never reached the gate {entry!r}"
        time.sleep(0.02)


def test_a_server_killed_mid_run_is_restarted_and_finishes_the_run_without_repeating_a_charge(served: Served) -> None:
    with served.client() as c:
        run_id = start(c, "gate-1", "slow")["run_id"]
    wait_for_oracle(served, "gate-1")  # charged, and now blocked in a tool that only reads
    served.kill()
    (served.gates / "gate-1").touch()
    served.start()
    with served.client() as c:
        done = wait_run(c, run_id, "finished")
    assert done["output"] == "all done"
    charges = [line for line in served.oracle_lines() if line[0] == "charge"]
    assert len(charges) == 1  # the `once` tool ran exactly once across both servers


def test_a_server_killed_inside_a_once_call_leaves_it_to_a_person_and_finishes_after_a_skip(served: Served) -> None:
    with served.client() as c:
        run_id = start(c, "inside-1", "slow")["run_id"]
    wait_for_oracle(served, "inside-1")  # inside the charge: it began, it has not reported back
    served.kill()
    served.start()
    with served.client() as c:
        run = wait_run(c, run_id, "needs-decision")
        (item,) = run["items"]
        assert (item["kind"], item["tool"], item["verdicts"]) == ("outcome-unknown", "charge_slowly", ["retry", "skip"])
        assert "by worker" in item["note"] and "may still complete" in item["note"]  # the API says who may (issue 25)
        url = f"/api/runs/{run_id}/items/{item['call_id']}/skip"
        assert c.post(url, json={"args_hash": item["args_hash"], "message": "it went through"}).status_code == 200
        done = wait_run(c, run_id, "finished")
    assert done["output"].startswith("all done: this call was interrupted and its outcome is unknown")
    assert "it went through" in done["output"]
    assert len([line for line in served.oracle_lines() if line[0] == "charge"]) == 1  # never run again by itself


def test_a_server_stopped_mid_run_resumes_the_run_it_interrupted_when_it_starts_again(sqlite_served: Served) -> None:
    served = sqlite_served
    with served.client() as c:
        run_id = start(c, "gate-3", "slow")["run_id"]
    wait_for_oracle(served, "gate-3")
    served.stop()  # SIGTERM: the run in flight ends `cancelled`, resumable
    (served.gates / "gate-3").touch()
    served.start()
    with served.client() as c:
        done = wait_run(c, run_id, "finished")
    assert done["output"] == "all done"
    assert len([line for line in served.oracle_lines() if line[0] == "charge"]) == 1


def test_items_decided_while_no_server_ran_are_picked_up_when_one_starts(sqlite_served: Served) -> None:
    import asyncio

    from tether import record_decisions
    from tether.serve._secrets import server_key
    from tether.stores import open_store

    served = sqlite_served
    with served.client() as c:
        run = start(c, "Refund A1234")
        run = wait_run(c, run["run_id"], "paused")
    served.stop()
    db = str(served.home / ".tether/runs.db")
    call_id = run["items"][0]["call_id"]

    async def approve() -> None:
        store = open_store(db)
        try:
            await record_decisions(store, run["run_id"], lambda s: s.approve(call_id, key=server_key(db, {})))
        finally:
            await store.aclose()

    asyncio.run(approve())
    served.start()
    with served.client() as c:
        done = wait_run(c, run["run_id"], "finished")
    assert "refunded" in done["output"]
