"""The real 0.5B local model returns a typed value (issue 12 item 1), decoded under T's JSON Schema."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from tether import Agent
from tether.providers import LocalModel

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


class Contact(pydantic.BaseModel):
    """A person mentioned in the message."""

    name: str
    city: str
    age: int


PROMPTS = [
    ("Ada Lovelace is 36 and lives in London.", "Ada"),
    ("Meet Bob Martin: 52 years old, from Chicago.", "Bob"),
    ("Chiara Rossi (29) moved to Milan last year.", "Chiara"),
    ("My neighbour Diego is 41; he lives in Madrid.", "Diego"),
    ("Emma Schmidt, aged 63, Berlin.", "Emma"),
]


@pytest.fixture(scope="module")
def model(model_path: Path) -> LocalModel:
    local = LocalModel(model_path, max_tokens=96)
    local.load()
    return local


async def test_the_local_model_returns_a_valid_instance_for_each_prompt(model: LocalModel) -> None:
    agent = Agent(model, output_type=Contact, instructions="Extract the contact from the message.", max_steps=4)
    results = [await agent.run(prompt) for prompt, _ in PROMPTS]
    assert [r.status for r in results] == ["finished"] * len(PROMPTS), [r.error for r in results]
    assert all(isinstance(r.output, Contact) for r in results)
    # The grammar makes the shape right; the content is the model's: most names must be right too.
    right = sum(first in r.output.name for r, (_, first) in zip(results, PROMPTS, strict=True))
    assert right >= 4, [r.output for r in results]
