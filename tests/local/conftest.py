"""Fixtures for tests that run the real local model (marked ``local_model``).

They need ``tether[local]`` (xllamacpp) and the 0.5B weight packages. Without
them the tests are skipped, unless ``TETHER_REQUIRE_LOCAL_MODEL=1`` (set in CI),
which turns the skip into a failure so a broken install cannot hide.

``llama_server`` is a real third-party OpenAI-compatible server: the llama.cpp
HTTP server inside xllamacpp, on 127.0.0.1, serving Qwen2.5-Coder-0.5B. One per
test session.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.exceptions import UserError

MODEL = "qwen2.5-coder-0.5b"


def _unavailable(reason: str) -> None:
    if os.environ.get("TETHER_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(f"the local model is required here but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The assembled, verified 0.5B GGUF (assembled on first use)."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        _unavailable("xllamacpp is not installed (pip install 'tether[local]')")
    from tether.providers._weights import gguf_path

    try:
        return gguf_path(MODEL)
    except UserError as exc:
        _unavailable(str(exc))
        raise


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # ends with /v1
    api_key: str
    server: Any  # keeps the xllamacpp.Server (and its port) alive


@pytest.fixture(scope="session")
def llama_server(model_path: Path) -> Iterator[LlamaServer]:
    from tether.providers.local import start_server

    key = secrets.token_urlsafe(16)
    server = start_server(model_path, threads=1, context_size=4096, api_key=key)
    yield LlamaServer(server.listening_address.rstrip("/") + "/v1", key, server)
    del server
