"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp's server)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import httpx

from ..exceptions import UserError

__all__ = ["openai_embeddings"]


def openai_embeddings(
    model: str, *, base_url: str = "https://api.openai.com/v1", api_key: str | None = None, timeout: float = 30.0
) -> Callable[[list[str]], Awaitable[list[list[float]]]]:
    """An embedding function posting to ``{base_url}/embeddings``; ``api_key`` defaults to ``OPENAI_API_KEY``.

    >>> embed = openai_embeddings("text-embedding-3-small", base_url="http://127.0.0.1:8080/v1")
    >>> embed.name
    'text-embedding-3-small'
    """
    url = base_url.rstrip("/") + "/embeddings"

    async def embed(texts: list[str]) -> list[list[float]]:
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx.AsyncClient(timeout=timeout) as client:
            reply = await client.post(url, json={"model": model, "input": texts}, headers=headers)
        if reply.status_code != 200:
            raise UserError(f"{url} answered {reply.status_code}: {reply.text[:200]}")
        data = sorted(reply.json()["data"], key=lambda d: d["index"])
        if len(data) != len(texts):
            raise UserError(f"{url} gave {len(data)} embeddings for {len(texts)} texts")
        return [list(map(float, d["embedding"])) for d in data]

    embed.name = model  # type: ignore[attr-defined]  # the model column: vectors of two models never mix
    return embed
