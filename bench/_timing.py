"""Per-request timings of a LocalModel, for the benchmarks (never imported by tether).

:class:`Recorder` wraps a model's ``complete_sync`` and keeps, for every request
the protocol sends, what kind it was (the ``json_schema`` name: ``decision``,
``verdict``, ``tool_call``; ``plain`` without a schema), the prompt tokens
(all of them, and the ones the server had to process past its cache), the
tokens generated and the binding's own milliseconds for each part.

    recorder = Recorder(model)          # from now on every request is recorded
    mark = recorder.mark()
    await model.decide(context, tools)
    rows = recorder.since(mark)         # the requests of that one decision

With ``cache=DIR`` a request identical to one sent before (same model, same
sampling, same body: decoding is deterministic at temperature 0) is answered
from the replies stored in ``DIR`` instead of the model, and marked ``cached``.
That makes a protocol variant cost only the requests it changes; its seconds
are then not a timing (the report says which requests were replayed).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Request:
    kind: str  # decision | verdict | tool_call | plain
    prompt_tokens: int  # the whole prompt
    prompt_processed: int  # past the server's prompt cache
    prompt_ms: float
    generated: int
    generate_ms: float
    wall_s: float
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Recorder:
    """Records every request a LocalModel sends (see the module docstring)."""

    def __init__(self, model: Any, cache: str | os.PathLike[str] | None = None) -> None:
        self.requests: list[Request] = []
        original = model.complete_sync
        replies = Replies(cache) if cache else None

        def complete_sync(body: dict[str, Any]) -> dict[str, Any]:
            key = _key(model, body)
            if replies is not None and (stored := replies.get(key)) is not None:
                self.requests.append(_request(body, stored, 0.0, cached=True))
                return stored
            t = time.perf_counter()
            data: dict[str, Any] = original(body)
            self.requests.append(_request(body, data, time.perf_counter() - t))
            if replies is not None:
                replies.put(key, data)
            return data

        model.complete_sync = complete_sync

    def mark(self) -> int:
        return len(self.requests)

    def since(self, mark: int) -> list[Request]:
        return self.requests[mark:]


class Replies:
    """Stored replies by request key: every ``*.jsonl`` in a folder, each process appending to its own."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.known: dict[str, dict[str, Any]] = {}
        for path in sorted(self.folder.glob("*.jsonl")):
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.known[row["key"]] = row["data"]
        self.mine = self.folder / f"{os.getpid()}-{int(time.time())}.jsonl"

    def get(self, key: str) -> dict[str, Any] | None:
        return self.known.get(key)

    def put(self, key: str, data: dict[str, Any]) -> None:
        self.known[key] = data
        with self.mine.open("a") as f:
            f.write(json.dumps({"key": key, "data": data}, ensure_ascii=False) + "\n")


def _key(model: Any, body: dict[str, Any]) -> str:
    what = {"model": str(getattr(model, "model", "")), "sampling": getattr(model, "sampling", {}), "body": body}
    return hashlib.sha256(json.dumps(what, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _request(body: dict[str, Any], data: dict[str, Any], wall: float, *, cached: bool = False) -> Request:
    fmt = body.get("response_format") or {}
    kind = (fmt.get("json_schema") or {}).get("name", "plain") if fmt else "plain"
    timings = data.get("timings") or {}
    usage = data.get("usage") or {}
    return Request(
        kind=kind,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        prompt_processed=int(timings.get("prompt_n", 0)),
        prompt_ms=float(timings.get("prompt_ms", 0.0)),
        generated=int(usage.get("completion_tokens", 0)),
        generate_ms=float(timings.get("predicted_ms", 0.0)),
        wall_s=wall,
        cached=cached,
    )


def summary(requests: list[Request]) -> dict[str, Any]:
    """One turn's totals: requests, tokens, seconds, and the share the decision requests took."""
    wall = sum(r.wall_s for r in requests)
    extra = sum(r.wall_s for r in requests if r.kind in ("decision", "verdict"))
    return {
        "requests": len(requests),
        "prompt_tokens": max((r.prompt_tokens for r in requests), default=0),
        "prompt_processed": sum(r.prompt_processed for r in requests),
        "generated": sum(r.generated for r in requests),
        "seconds": round(wall, 3),
        "decision_seconds": round(extra, 3),
        "decision_share": round(extra / wall, 3) if wall else 0.0,
        "extra_seconds": round(extra_seconds(requests), 3),
        "extra_share": round(extra_seconds(requests) / wall, 3) if wall else 0.0,
        "cached": sum(r.cached for r in requests),
    }


def extra_seconds(requests: list[Request]) -> float:
    """What the decision requests cost beyond the reply's own work.

    The first request of a turn processes the whole prompt, which the reply
    then finds in the server's cache: that part is work the reply would have
    done anyway. The rest of the decision requests' time (their generation,
    the prompt they do not share with the reply) is the protocol's extra.
    """
    decisions = [r for r in requests if r.kind in ("decision", "verdict")]
    replies = [r for r in requests if r.kind not in ("decision", "verdict")]
    if not decisions or not replies:
        return sum(r.wall_s for r in decisions)
    reused = max(0, replies[0].prompt_tokens - replies[0].prompt_processed)
    first = decisions[0]
    per_token = first.prompt_ms / first.prompt_processed / 1000 if first.prompt_processed else 0.0
    return max(0.0, sum(r.wall_s for r in decisions) - min(reused, first.prompt_processed) * per_token)
