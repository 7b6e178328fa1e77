"""The HTTP API over a real server on loopback, with SQLite and with PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx

from tether import record_decisions
from tether.stores import open_store

from .conftest import Served, paused, start, wait_run


def item_of(run: dict) -> dict:  # type: ignore[type-arg]
    (item,) = [i for i in run["items"] if i["decision"] is None]
    return item


def decide(client: httpx.Client, item: dict, verdict: str, **body: object) -> httpx.Response:  # type: ignore[type-arg]
    url = f"/api/runs/{item['run_id']}/items/{item['call_id']}/{verdict}"
    return client.post(url, json={"args_hash": item["args_hash"], **body})


def test_a_run_started_over_the_api_pauses_is_approved_and_finishes(served: Served) -> None:
    with served.client() as c:
        run = paused(c, "Refund A1234, it arrived broken")
        item = item_of(run)
        assert (item["kind"], item["tool"], item["verdicts"]) == ("approval", "issue_refund", ["approve", "deny"])
        assert item["arguments"] == {"order_id": "A1234", "amount": 79, "note": ""}
        assert item["parameters"]["required"] == ["order_id", "amount"]
        decided = decide(c, item, "approve", by="ana")
        assert decided.status_code == 200, decided.text
        done = wait_run(c, run["run_id"], "finished")
    assert done["output"] == "Done: $79 refunded to the original card for A1234."
    assert "said approve" in done["trace"]
    assert [line[0] for line in served.oracle_lines()] == ["issue_refund"]


def test_a_retried_start_with_the_same_key_or_run_id_starts_one_run(served: Served) -> None:
    with served.client() as c:
        body = {"agent": "echo", "input": "hello"}
        first = c.post("/api/runs", json=body, headers={"idempotency-key": "order-77"})
        again = c.post("/api/runs", json=body, headers={"idempotency-key": "order-77"})
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["run_id"] == again.json()["run_id"]
        other = c.post("/api/runs", json={**body, "input": "bye"}, headers={"idempotency-key": "order-77"})
        assert other.status_code == 409 and other.json()["error"]["code"] == "run-exists"
        mine = c.post("/api/runs", json={**body, "run_id": "my-run-1"})
        assert mine.status_code == 201 and mine.json()["run_id"] == "my-run-1"
        assert c.post("/api/runs", json={**body, "run_id": "my-run-1"}).status_code == 200
        wait_run(c, "my-run-1", "finished")
        echo_runs = c.get("/api/runs", params={"agent": "echo", "limit": 500}).json()["runs"]
    assert len(echo_runs) == 2


def test_a_decision_for_other_arguments_than_the_open_item_is_a_409_with_the_run(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund B777"))
        stale = decide(c, {**item, "args_hash": "0" * 32}, "approve")
        assert stale.status_code == 409
        body = stale.json()
        assert body["error"]["code"] == "stale"
        assert item_of(body["run"])["args_hash"] == item["args_hash"]  # what is really waiting
        assert decide(c, item, "deny", message="not this one").status_code == 200
        done = wait_run(c, item["run_id"], "finished")
    assert "a human denied this call: not this one" in done["output"]
    assert served.oracle_lines() == []


def test_a_second_decision_on_one_item_is_a_409_naming_who_won(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund C555"))
        first = decide(c, item, "deny", message="no", by="ana")
        second = decide(c, item, "approve", by="bob")
    assert first.status_code == 200
    assert second.status_code == 409
    error = second.json()["error"]
    assert error["code"] in ("already-decided", "not-waiting")  # the run may have resumed in between
    assert "deny by api:ana" in error["message"]


def test_cancel_ends_a_paused_run_for_good(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund D900"))
        cancelled = c.post(f"/api/runs/{item['run_id']}/cancel", json={"reason": "duplicate ticket", "by": "ana"})
        assert cancelled.status_code == 200, cancelled.text
        assert (cancelled.json()["status"], cancelled.json()["closed"]) == ("cancelled", True)
        assert decide(c, item, "approve").status_code == 409
        again = c.post(f"/api/runs/{item['run_id']}/cancel")
        assert again.status_code == 409 and again.json()["error"]["code"] == "already-ended"
        assert c.post("/api/runs/nope/cancel").status_code == 404
    assert served.oracle_lines() == []


def test_the_event_stream_resumes_after_a_position_and_loses_nothing(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund A1234"))
        run_id = item["run_id"]
        seen: list[int] = []
        with c.stream("GET", f"/api/runs/{run_id}/stream") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if line.startswith("id: "):
                    seen.append(int(line[4:]))
                if line == "event: paused":
                    break
        assert seen == list(range(1, len(seen) + 1))
        assert decide(c, item, "approve").status_code == 200
        rest: list[int] = []
        kinds: list[str] = []
        headers = {"last-event-id": str(seen[-1])}
        with c.stream("GET", f"/api/runs/{run_id}/stream", headers=headers) as response:
            for line in response.iter_lines():
                if line.startswith("id: "):
                    rest.append(int(line[4:]))
                elif line.startswith("event: "):
                    kinds.append(line[7:])
        listed = c.get(f"/api/runs/{run_id}/events").json()
    assert seen + rest == list(range(1, len(seen) + len(rest) + 1))  # no gap, no repeat
    assert kinds[-2:] == ["finished", "end"]
    assert [e["position"] for e in listed["events"]] == seen + rest
    assert listed["next"] == len(seen + rest)


def test_edited_arguments_must_fit_the_tool_and_then_the_tool_runs_with_them(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund B777"))
        bad = decide(c, item, "approve", args={"order_id": "B777", "amount": "lots"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid-arguments"
        assert "amount" in bad.json()["error"]["message"]
        unknown = decide(c, item, "approve", args={"order_id": "B777", "amount": 5, "extra": 1})
        assert unknown.status_code == 422
        good = decide(c, item, "approve", args={"order_id": "B777", "amount": 200})
        assert good.status_code == 200, good.text
        done = wait_run(c, item["run_id"], "finished")
    assert done["output"].endswith("$200 refunded to the original card for B777.")
    assert "a human edited the arguments" in done["output"]  # the model is told
    assert served.oracle_lines()[0][3:] == ["B777", 200]


def test_a_question_is_answered_and_the_answer_becomes_the_result(served: Served) -> None:
    with served.client() as c:
        run = paused(c, "my order broke, I want my money back")
        question = item_of(run)
        assert (question["kind"], question["question"]) == ("question", "Which order is this about?")
        assert question["verdicts"] == ["answer"] and question["answer_schema"] == {"type": "string"}
        assert decide(c, question, "approve").status_code == 422  # a question takes an answer
        assert decide(c, question, "answer", answer=None).status_code == 422
        wrong = decide(c, question, "answer", answer=42)  # not a string
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid-answer"  # as docs/serve.md says
        assert decide(c, question, "answer", answer="It is D900").status_code == 200
        refund = item_of(_next_pause(c, run["run_id"]))
        assert refund["arguments"]["order_id"] == "D900"


def _next_pause(c: httpx.Client, run_id: str) -> dict:  # type: ignore[type-arg]
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = c.get(f"/api/runs/{run_id}").json()
        if run["status"] == "paused" and any(i["decision"] is None and i["kind"] == "approval" for i in run["items"]):
            return run  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never paused for the refund")


def test_runs_are_listed_by_status_and_agent_page_by_page(served: Served) -> None:
    with served.client() as c:
        ids = [start(c, f"hello {n}", "echo")["run_id"] for n in range(5)]
        for run_id in ids:
            wait_run(c, run_id, "finished")
        first = c.get("/api/runs", params={"status": "finished", "agent": "echo", "limit": 2}).json()
        second = c.get("/api/runs", params={"status": "finished", "agent": "echo", "limit": 2, "offset": 2}).json()
        third = c.get("/api/runs", params={"status": "finished", "agent": "echo", "limit": 2, "offset": 4}).json()
        assert c.get("/api/runs", params={"status": "sleeping"}).status_code == 422
        assert c.get("/api/runs", params={"limit": "0"}).status_code == 422
        assert c.get("/api/runs/unknown-run").status_code == 404
    listed = [r["run_id"] for page in (first, second, third) for r in page["runs"]]
    assert sorted(listed) == sorted(ids) and len(listed) == 5
    assert (first["next_offset"], second["next_offset"], third["next_offset"]) == (2, 4, None)


def test_a_decision_recorded_by_another_process_is_noticed_and_the_run_resumes(served: Served) -> None:
    with served.client() as c:
        item = item_of(paused(c, "Refund A1234"))

        async def approve_elsewhere() -> None:
            from tether.serve._secrets import server_key

            url = served.store if served.backend == "postgres" else str(served.home / ".tether/runs.db")
            store, key = open_store(url), server_key(url, served.env)
            try:
                await record_decisions(
                    store, item["run_id"], lambda s: s.approve(item["call_id"], by="cli:ops", key=key)
                )
            finally:
                await store.aclose()

        asyncio.run(approve_elsewhere())
        done = wait_run(c, item["run_id"], "finished")
        events = c.get(f"/api/runs/{item['run_id']}/events").json()["events"]
    assert "Done: $79 refunded" in done["output"]
    decided = [e["event"]["decision"] for e in events if e["kind"] == "approval-decided"]
    assert [(d["by"], d["verdict"]) for d in decided] == [("cli:ops", "approve")]
    assert len(served.oracle_lines()) == 1


def test_an_item_waiting_in_a_child_run_is_listed_and_decided_through_its_root(sqlite_served: Served) -> None:
    with sqlite_served.client() as c:
        run = paused(c, "a refund for A1234, through billing", "desk")
        item = item_of(run)
        assert "/" in item["call_id"] and item["label"] == "desk › billing › issue_refund"
        assert item["parameters"]["required"] == ["order_id", "amount"]  # the child's tool, found down the path
        assert [i["call_id"] for i in c.get("/api/items").json()["items"]] == [item["call_id"]]
        assert decide(c, item, "approve", args={"order_id": "A1234", "amount": "x"}).status_code == 422
        assert decide(c, item, "approve", by="ana").status_code == 200
        done = wait_run(c, run["run_id"], "finished")
        listed = [r["run_id"] for r in c.get("/api/runs").json()["runs"]]
    assert done["output"] == "desk: billing: $79 refunded to the original card for A1234"
    assert listed == [run["run_id"]]  # the child run is shown through its root
    assert len(sqlite_served.oracle_lines()) == 1
