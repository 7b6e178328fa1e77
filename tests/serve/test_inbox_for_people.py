"""The inbox for people who are not developers (issue 22, item 3), in the real browser.

Playwright drives Debian's Chromium against a real server. A card shows the
tool's description, "The customer wrote", the arguments as rows from the tool's
schema (money as money, a choice as a chip, yes/no as Yes/No) with the raw
JSON behind a toggle, and the whole run id. "Edit" is a form made from the
schema: an amount over the tool's maximum is refused in the browser (the field
and the schema check) and, sent anyway past the page's script, by the server.
A deny shows as a red ✕ and the call as "not run", not a failure; an item
whose outcome is unknown offers "Don't run it again" first, and skipping it
shows as a skip. Screenshots at desktop and phone widths go to the artifacts
(and to docs/img/ with ``TETHER_UPDATE_SCREENSHOT=1``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Served, paused, start, wait_run
from .test_browser import artifacts, browser, card  # noqa: F401  (fixtures)

DOCS = Path(__file__).parents[2] / "docs" / "img"
SHOTS = ("inbox-card.png", "inbox-edit.png", "inbox-mobile.png", "inbox-unknown.png")


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path, "sqlite")
    try:
        yield s.start("tests.serve.apps:shop", "tests.serve.apps:slow")
    finally:
        s.stop()


def outcome_unknown(served: Served) -> str:
    """A run whose `once` charge was cut off by kill -9: its item's outcome is unknown."""
    with served.client() as api:
        run_id = start(api, "inside-1", "slow")["run_id"]
    deadline = time.monotonic() + 30
    while not any(line[:2] == ["waiting", "inside-1"] for line in served.oracle_lines()):
        assert time.monotonic() < deadline, "the charge never began"
        time.sleep(0.02)
    served.kill()
    served.start("tests.serve.apps:shop", "tests.serve.apps:slow")
    with served.client() as api:
        wait_run(api, run_id, "needs-decision")
    return run_id


def sign_in(chromium: Any, served: Served, width: int, height: int) -> Any:
    page = chromium.new_page(viewport={"width": width, "height": height})
    page.goto(f"{served.url}/login")
    page.fill("input[name=name]", "Ana")
    page.fill("input[name=token]", served.token)
    page.keyboard.press("Enter")
    page.wait_for_selector(".item")
    return page


def test_a_person_reads_and_edits_a_refund_in_words_and_the_amount_cap_holds_on_both_sides(
    desk: Served,
    browser: Any,  # noqa: F811
    artifacts: Path,  # noqa: F811
) -> None:
    unknown = outcome_unknown(desk)
    with desk.client() as api:
        deny = paused(api, "Refund D900, the boots are fine but I changed my mind", agent="shop")["run_id"]
        edit = paused(api, "Refund B777, the espresso machine leaks", agent="shop")["run_id"]

    page = sign_in(browser, desk, 1280, 1000)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    refund = card(page, edit)

    # Read in words: the tool's own description, who wrote the task, the arguments as the schema names them.
    assert refund.locator(".about-tool").inner_text().startswith("Refund an order to the customer's card.")
    assert refund.locator(".task .who").inner_text() == "The customer wrote"
    rows = dict(
        zip(
            refund.locator("dl.fields dt").all_inner_texts(),
            refund.locator("dl.fields dd").all_inner_texts(),
            strict=True,
        )
    )
    rows = {k.split("\n")[0]: v for k, v in rows.items()}
    assert rows == {
        "Order id": "B777",
        "Amount": "$249.00",
        "Reason": "damaged",
        "Notify customer": "Yes",
        "Note": "(empty)",
    }
    assert refund.locator("dl.fields .field[data-arg=amount] .about").inner_text().startswith("How much to refund")
    assert refund.locator("details.raw-json pre.json").is_hidden()  # the raw JSON waits behind its toggle
    refund.locator("details.raw-json > summary").click()
    assert '"amount": 249' in refund.locator("details.raw-json pre.json").inner_text()
    rid = refund.locator("code.rid")
    assert rid.inner_text() == edit and rid.get_attribute("title") == edit  # whole, with a tooltip
    refund.locator("details.story-box > summary").click()
    assert "The customer wrote" in refund.locator("ol.story li.asked").inner_text()
    page.screenshot(path=str(artifacts / "inbox-card.png"))

    # Edit from the keyboard: the form is the schema's; an amount over $500 is refused before anything is sent.
    refund.focus()
    page.keyboard.press("e")
    form = refund.locator("form.fields-edit")
    assert form.locator("[name='arg:order_id']").evaluate("el => el === document.activeElement")
    assert form.locator("select[name='arg:reason'] option").all_inner_texts() == [
        "damaged",
        "late",
        "wrong item",
        "other",
    ]
    assert form.locator("[name='arg:amount']").get_attribute("max") == "500"
    form.locator("[name='arg:amount']").fill("9999")
    assert "amount: must be at most 500" in form.locator(".problems").inner_text()
    assert form.locator("button").is_disabled()
    assert form.locator("[name='arg:amount']").evaluate("el => el.validity.rangeOverflow")
    page.screenshot(path=str(artifacts / "inbox-edit.png"))

    # Sent anyway, past the page's checks (the form's own fields, by hand): the server refuses it too.
    status, body = page.evaluate(
        """async (f) => {
            const form = document.querySelector(f);
            const body = new URLSearchParams(new FormData(form));
            body.set("verdict", "approve");
            const r = await fetch(form.action, {method: "POST", body, headers: {Accept: "application/json"}});
            return [r.status, await r.json()];
        }""",
        f'.item[data-run="{edit}"] form.fields-edit',
    )
    assert status == 422, body
    assert problems == ["Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"]
    problems.clear()  # that refusal was the point; nothing else may go wrong
    assert "less than or equal to 500" in body["error"]["message"]
    with desk.client() as api:
        assert api.get(f"/api/runs/{edit}").json()["status"] == "paused"  # nothing was decided
    assert [line for line in desk.oracle_lines() if line[0] == "refund_order"] == []

    # A fair amount, another reason, no email: approved with these changes.
    form.locator("[name='arg:amount']").fill("200")
    form.locator("select[name='arg:reason']").select_option("late")
    form.locator("select[name='arg:notify_customer']").select_option("false")
    assert form.locator(".problems").inner_text() == ""
    form.locator("button[value=approve]").click()
    refund.wait_for(state="detached")

    # Deny from the keyboard, with a message.
    card(page, deny).focus()
    page.keyboard.press("d")
    page.keyboard.type("A change of mind is not a defect: offer a return instead.")
    page.keyboard.press("Control+Enter")
    card(page, deny).wait_for(state="detached")

    # Outcome unknown: the safe choice is the primary one; running it again sits behind a warning.
    cut = card(page, unknown)
    assert cut.locator("button.primary").inner_text() == "Don't run it again"
    assert cut.locator("details.more button[value=retry]").is_hidden()
    assert "may or may not have happened" in cut.locator(".note.warn").first.inner_text()
    page.screenshot(path=str(artifacts / "inbox-unknown.png"))
    cut.focus()
    page.keyboard.press("s")
    cut.wait_for(state="detached")

    with desk.client() as api:
        outputs = {r: wait_run(api, r, "finished")["output"] for r in (edit, deny, unknown)}
    assert outputs[edit].endswith("$200.00 refunded for B777 (late).")
    assert "offer a return instead" in outputs[deny]
    refunds = [line[2:] for line in desk.oracle_lines() if line[0] == "refund_order"]
    assert refunds == [["B777", 200, "late", False]]
    assert len([line for line in desk.oracle_lines() if line[0] == "charge"]) == 1

    # The stories say what people decided, with icons that match: a deny is a red ✕, a skip is not a failure.
    page.goto(f"{desk.url}/runs/{deny}")
    decided = page.locator("ol.story li.decided")
    assert decided.get_attribute("class") == "decided v-no" and "✕" in decided.inner_text()
    assert "web:Ana denied" in decided.inner_text()
    assert "refund_order was not run (denied)" in page.locator("ol.story li.not-run").inner_text()
    assert page.locator("ol.story li.error").count() == 0
    page.goto(f"{desk.url}/runs/{unknown}")
    assert page.locator("ol.story li.decided").get_attribute("class") == "decided v-skip"
    assert "charge_slowly was not run again (skipped)" in page.locator("ol.story li.not-run").inner_text()
    assert page.locator("ol.story li.error").count() == 0
    page.goto(f"{desk.url}/runs/{edit}")
    assert "✓" in page.locator("ol.story li.decided").inner_text()
    assert problems == []  # no script error, no CSP violation
    page.close()

    # A phone: the same card, one column.
    with desk.client() as api:
        paused(api, "Refund A1234, the headphones crackle", agent="shop")
    phone = sign_in(browser, desk, 390, 844)
    phone.locator("details.story-box > summary").first.click()
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    phone.screenshot(path=str(artifacts / "inbox-mobile.png"), full_page=True)
    phone.close()
    if os.environ.get("TETHER_UPDATE_SCREENSHOT"):
        for name in SHOTS:
            shutil.copy(artifacts / name, DOCS / name)
