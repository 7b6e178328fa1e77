"""Skills on the wire, through a real HTTP server on loopback: the first request carries each
skill's name and description and not a byte of its instructions; they arrive once ``load_skill`` ran."""

from __future__ import annotations

import json
from pathlib import Path

from tether import Agent

from .conftest import Make
from .fakeserver import FakeServer, turn

BODY = "Step 1: greet the customer by name.\nStep 2: offer the voucher code SECRET-BODY-7781."


def _skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, description, body in (
        ("greet-customers", "Greet a returning customer. Use at the start of a support chat.", BODY),
        ("refund-rules", "When a refund is allowed and how much. Use before any refund.", "Refunds: 30 days."),
    ):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    (root / "greet-customers" / "voucher.txt").write_text("V-1\n")
    return root


async def test_only_the_description_is_in_the_first_request_and_the_body_comes_on_demand(
    make: Make, server: FakeServer, tmp_path: Path
) -> None:
    server.push(turn(tool_calls=[("c1", "load_skill", {"name": "greet-customers"})]), turn("Hello Ana!"))
    agent = Agent(make("openai"), instructions="You help customers.", skills=[_skills(tmp_path)])
    result = await agent.run("Ana is back")
    assert result.output == "Hello Ana!"

    system = (
        "You help customers.\n\n"
        "Skills: each is a folder of instructions (and files) for one kind of task. When a task fits a skill's "
        "description, call load_skill with its name first and follow what it says.\n"
        "- greet-customers: Greet a returning customer. Use at the start of a support chat.\n"
        "- refund-rules: When a refund is allowed and how much. Use before any refund."
    )
    first, second = (r.body for r in server.requests)
    expected = json.dumps({"role": "system", "content": system}, ensure_ascii=False, separators=(",", ":"))
    start = first.index(b'"messages":[') + len(b'"messages":[')
    assert first[start : start + len(expected.encode())] == expected.encode()  # byte for byte
    assert b"SECRET-BODY-7781" not in first and b"Refunds: 30 days" not in first
    assert first[:-2] == second[: len(first) - 2]  # the prefix holds: the body joined at the end
    [result_message] = [m for m in json.loads(second)["messages"] if m["role"] == "tool"]
    loaded = result_message["content"]
    assert BODY in loaded and "- voucher.txt" in loaded and "Refunds" not in loaded
    tool_names = [t["function"]["name"] for t in json.loads(first)["tools"]]
    assert tool_names == ["load_skill"]
