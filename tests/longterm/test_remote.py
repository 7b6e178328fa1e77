"""An OpenAI-compatible /embeddings endpoint as the embedder: a real HTTP server on loopback."""

from __future__ import annotations

from typing import Any

import pytest

from providers.fakeserver import FakeServer, Reply
from tether.exceptions import UserError
from tether.longterm import Memory, openai_embeddings


def embeddings(request: Any) -> Reply:
    """Vectors by letter counts, listed in reverse order (the client must sort by index)."""
    texts = request.json()["input"]
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": [t.lower().count(c) + 0.01 for c in "abcdefghijklmnopqrstuvwxyz"],
        }
        for i, t in enumerate(texts)
    ]
    return Reply(200, {"object": "list", "data": data[::-1], "model": request.json()["model"]})


async def test_memory_embeds_through_an_embeddings_endpoint() -> None:
    with FakeServer(handler=embeddings) as server:
        memory = Memory(embed=openai_embeddings("emb-small", base_url=server.openai_url, api_key="k"))
        await memory.remember("zebra crossing at the zoo", namespace="n")
        await memory.remember("apple banana", namespace="n")
        found = await memory.recall("zzz", namespace="n", k=1)
        assert found[0].item.text == "zebra crossing at the zoo"
        assert memory.model == "emb-small"
        first = server.requests[0]
        assert first.path == "/v1/embeddings" and first.headers["authorization"] == "Bearer k"
        assert first.json() == {"model": "emb-small", "input": ["zebra crossing at the zoo"]}


async def test_an_endpoint_error_is_a_clear_error_and_stores_nothing() -> None:
    with FakeServer(handler=lambda request: Reply.error(503, "overloaded")) as server:
        memory = Memory(embed=openai_embeddings("emb-small", base_url=server.openai_url, api_key="k"))
        with pytest.raises(UserError, match="/embeddings answered 503"):
            await memory.remember("anything", namespace="n")
        assert await memory.all("n") == []
