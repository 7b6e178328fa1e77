"""examples/refund_server.py, served as the README says, does what the README says."""

from __future__ import annotations

from .conftest import Served, paused, wait_run


def test_the_served_refund_example_waits_for_a_person_and_asks_when_the_order_is_missing(sqlite_served: Served) -> None:
    served = sqlite_served
    served.stop()
    served.start("examples.refund_server:support")
    with served.client() as c:
        run = paused(c, "Can I get a refund for order A1234? It arrived broken.")
        (item,) = run["items"]
        assert (item["tool"], item["arguments"]) == ("issue_refund", {"order_id": "A1234", "amount": 79})
        url = f"/api/runs/{run['run_id']}/items/{item['call_id']}/approve"
        assert c.post(url, json={"args_hash": item["args_hash"], "by": "lead"}).status_code == 200
        done = wait_run(c, run["run_id"], "finished")
        assert done["output"] == "Good news, A1234 qualifies. I refunded $79 to your card; expect it in 3 to 5 days."
        asked = paused(c, "My lamp does not work, refund please")
        (question,) = asked["items"]
        assert question["question"].startswith("Which order is this about?")
