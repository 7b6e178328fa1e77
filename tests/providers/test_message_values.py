"""What providers added to the core values: Reasoning on messages, the answering model, cache counts in Usage.

(These test messages.py; they live here beside the providers that fill the new fields.)
"""

from __future__ import annotations

import json

import pytest

from tether import Message, ToolCall, Usage
from tether.messages import Reasoning

REPLY = Message(
    "assistant",
    "Checking.",
    (ToolCall("c1", "look_up", "{}"),),
    reasoning=(Reasoning("Look it up.", signature="sig"), Reasoning(redacted="b3BhcXVl")),
    usage=Usage(100, 5, 1, cache_read_tokens=80, cache_write_tokens=20),
    model="claude-sonnet-4-5",
)


def test_reasoning_model_and_cache_counts_round_trip_through_json() -> None:
    data = json.loads(json.dumps(REPLY.to_dict()))
    assert data["reasoning"] == [{"text": "Look it up.", "signature": "sig"}, {"redacted": "b3BhcXVl"}]
    assert data["usage"] == {
        "input_tokens": 100,
        "output_tokens": 5,
        "requests": 1,
        "cache_read_tokens": 80,
        "cache_write_tokens": 20,
    }
    again = Message.from_dict(data)
    assert again == REPLY and again.reasoning == REPLY.reasoning
    assert (again.model, again.usage) == ("claude-sonnet-4-5", REPLY.usage)


def test_values_without_the_new_fields_serialise_as_before() -> None:
    old = {"role": "assistant", "content": "hi", "usage": {"input_tokens": 3, "output_tokens": 1, "requests": 1}}
    message = Message.from_dict(old)  # JSON persisted before these fields existed
    assert message.to_dict() == old and message.reasoning == () and message.model is None


def test_reasoning_is_part_of_the_note_and_the_model_is_not() -> None:
    assert Message.assistant("x", reasoning=[Reasoning("a")]) != Message.assistant("x", reasoning=[Reasoning("b")])
    assert Message("assistant", "x", model="a") == Message("assistant", "x", model="b")


def test_cache_counts_add_up() -> None:
    total = Usage(10, 1, 1, cache_read_tokens=4) + Usage(20, 2, 1, cache_write_tokens=7)
    assert total == Usage(30, 3, 2, 4, 7) and repr(total).endswith("cache_read_tokens=4, cache_write_tokens=7)")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"role": "assistant", "content": "", "reasoning": [{"txt": "x"}]}, "unknown reasoning field"),
        ({"role": "assistant", "content": "", "reasoning": [{"text": 3}]}, "'text' must be a string"),
        ({"role": "assistant", "content": "", "reasoning": {"text": "x"}}, "must be lists"),
        ({"role": "assistant", "content": "", "model": 7}, "'model' must be a string or null"),
        ({"role": "user", "content": "", "reasoning": [{"text": "x"}]}, "only assistant messages carry reasoning"),
        (
            {
                "role": "user",
                "content": "",
                "usage": {"input_tokens": 1, "output_tokens": 1, "requests": 1, "cache_read_tokens": "2"},
            },
            "integer counts",
        ),
    ],
)
def test_the_new_fields_are_read_strictly(data: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Message.from_dict(data)
