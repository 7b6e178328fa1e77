"""The inbox in a real browser: Playwright driving Debian's Chromium against a real server.

A person signs in, approves a refund, edits one, denies one with a message the
model then reads, and answers a question, mostly from the keyboard; the runs
finish. Arguments holding ``<script>``, ``<img onerror>`` and ``javascript:``
show as text and run nothing. Screenshots are saved as test artifacts (the
directory is printed; ``TETHER_ARTIFACTS`` chooses it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Served, paused, wait_run

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
XSS = (
    'Refund C555 <script>window.__xss = 1</script> <img src=x onerror="window.__xss = 2; alert(2)"> javascript:alert(3)'
)


@pytest.fixture
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = (
        Path(os.environ["TETHER_ARTIFACTS"])
        if os.environ.get("TETHER_ARTIFACTS")
        else tmp_path_factory.mktemp("screens")
    )
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {where}")
    return where


@pytest.fixture
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def card(page: Any, run_id: str) -> Any:
    return page.locator(f'.item[data-run="{run_id}"]')


def test_a_person_signs_in_and_decides_every_kind_of_item(sqlite_served: Served, browser: Any, artifacts: Path) -> None:
    served = sqlite_served
    with served.client() as api:
        xss = paused(api, XSS)["run_id"]
        deny = paused(api, "Refund D900 please")["run_id"]
        edit = paused(api, "Refund A1234, the headphones crackle")["run_id"]
        ask = paused(api, "My order broke, I want my money back")["run_id"]
        approve = paused(api, "Can I get a refund for order B777? The espresso machine leaks.")["run_id"]

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    problems: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    page.goto(f"{served.url}/")
    assert page.url.endswith("/login?next=/")
    page.screenshot(path=str(artifacts / "login.png"))
    page.fill("input[name=name]", "Ana")
    page.fill("input[name=token]", served.token)
    page.keyboard.press("Enter")
    page.wait_for_selector(".item")
    page.wait_for_selector("#live.on")  # the live stream is connected
    assert page.locator(".item").count() == 5
    card(page, approve).locator("details.story-box > summary").click()
    page.screenshot(path=str(artifacts / "inbox.png"))

    # The payloads are text on the page, and none of them ran.
    xss_card = card(page, xss)
    assert "<script>window.__xss = 1</script>" in xss_card.locator("dl.fields").inner_text()
    assert "<script>window.__xss = 1</script>" in xss_card.locator("pre.json").text_content()
    assert page.evaluate("window.__xss") is None and dialogs == []

    # Approve with the mouse.
    card(page, approve).locator('form.decide:not(.edit) button[value="approve"]').click()
    card(page, approve).wait_for(state="detached")

    # Edit with the keyboard, as JSON: a wrong amount is caught before anything is sent.
    card(page, edit).focus()
    page.keyboard.press("e")
    assert card(page, edit).locator("[name='arg:order_id']").evaluate("el => el === document.activeElement")
    card(page, edit).locator("details.json-edit > summary").click()
    editor = card(page, edit).locator("textarea[name=args]")
    editor.fill('{"order_id": "A1234", "amount": "lots"}')
    assert "amount: must be integer" in card(page, edit).locator("details.json-edit .problems").inner_text()
    assert editor.locator("xpath=ancestor::form").locator("button").is_disabled()
    editor.fill('{"order_id": "A1234", "amount": 20}')
    page.keyboard.press("Control+Enter")
    card(page, edit).wait_for(state="detached")

    # Deny with a message, from the keyboard.
    card(page, deny).focus()
    page.keyboard.press("d")
    page.keyboard.type("Refunds for boots need the box back first.")
    page.keyboard.press("Control+Enter")
    card(page, deny).wait_for(state="detached")

    # Answer the question; the refund it leads to arrives live, without a reload, and is approved with "a".
    card(page, ask).locator("textarea[name=answer]").fill("It was order C555")
    card(page, ask).locator('button[value="answer"]').click()
    refund = page.locator(f'.item.k-approval[data-run="{ask}"]')
    refund.wait_for(timeout=15_000)
    assert '"C555"' in refund.locator("pre.json").text_content()
    page.screenshot(path=str(artifacts / "live-update.png"))
    refund.focus()
    page.keyboard.press("a")
    refund.wait_for(state="detached")

    with served.client() as api:
        outputs = {r: wait_run(api, r, "finished")["output"] for r in (approve, edit, deny, ask)}
        assert api.get(f"/api/runs/{xss}").json()["status"] == "paused"
    assert outputs[approve] == "Done: $249 refunded to the original card for B777."
    assert outputs[edit].endswith("$20 refunded to the original card for A1234.")
    assert "Refunds for boots need the box back first." in outputs[deny]  # the model read the message
    assert outputs[ask] == "Done: $35 refunded to the original card for C555."
    refunds = sorted((line[3], line[4]) for line in served.oracle_lines())
    assert refunds == [("A1234", 20), ("B777", 249), ("C555", 35)]

    page.goto(f"{served.url}/runs/{ask}")
    page.wait_for_selector("ol.story li.final")
    page.screenshot(path=str(artifacts / "run.png"), full_page=True)
    page.goto(f"{served.url}/")
    page.wait_for_selector(".item")
    assert page.locator(".item").count() == 1  # only the payload run is left
    assert page.evaluate("window.__xss") is None and dialogs == []
    assert problems == []  # no script error, no CSP violation
    page.close()
    if os.environ.get("TETHER_UPDATE_SCREENSHOT"):
        shutil.copy(artifacts / "inbox.png", Path(__file__).parents[2] / "docs" / "img" / "inbox.png")
