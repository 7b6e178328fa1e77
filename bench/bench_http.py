"""HTTP provider benchmark: tether (Agent + OpenAICompatible) against a bare httpx loop.

Both sides send the same chat-completions requests to a loopback mock server
(a minimal asyncio server in its own process, answering from pre-rendered
replies, so it is not the bottleneck): each run makes K = 10 tool round-trips
and a final answer, 11 requests in all. Each configuration runs in a fresh
client process, so peak RSS is its own.

* CPU per step: client CPU time (user + system) per model request at
  concurrency 1, 100 and 1,000; target tether <= 1.5x the bare loop at each.
* steps/s and peak RSS at 1, 100 and 1,000 concurrent runs; target at 1,000:
  tether >= 0.8x the bare loop's steps/s.

Run: python bench/bench_http.py [--quick]   (prints a table; nothing here is a test)
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

K = 10  # tool round-trips per run
MODEL = "bench-model"
TOOL_DEF = {
    "type": "function",
    "function": {
        "name": "step",
        "description": "Take one step.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "type": "object",
        },
    },
}

# -- the mock server -------------------------------------------------------------


def _replies(streaming: bool) -> list[bytes]:
    """HTTP responses for a request that already holds ``i`` tool results (i = 0..K)."""
    out = []
    for i in range(K + 1):
        if i < K:
            call = {"id": f"call_{i}", "type": "function", "function": {"name": "step", "arguments": f'{{"n": {i}}}'}}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": "All steps taken."}
        usage = {"prompt_tokens": 100 + i, "completion_tokens": 10, "total_tokens": 110 + i}
        finish = "tool_calls" if i < K else "stop"
        if not streaming:
            body = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": MODEL,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            ).encode()
            head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
            out.append(head + body)
            continue
        delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
        if i < K:
            delta = {"role": "assistant", "tool_calls": [{"index": 0, **message["tool_calls"][0]}]}
        chunks = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {"choices": [], "usage": usage},
        ]
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(body)
        out.append(head + body)
    return out


class _MockProtocol(asyncio.Protocol):
    plain = _replies(False)
    streamed = _replies(True)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = _content_length(self.buffer[:end])
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            answered = body.count(b'"role":"tool"')
            replies = self.streamed if b'"stream":true' in body else self.plain
            self.transport.write(replies[min(answered, K)])


def _content_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line[15:])
    return 0


def serve() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_MockProtocol, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()

    asyncio.run(main())


# -- the two clients -----------------------------------------------------------------


def _limits() -> Any:
    import httpx

    return httpx.Limits(max_connections=1000, max_keepalive_connections=100)


async def bare_run(client: Any, url: str) -> int:
    """The same conversation with nothing but httpx and json."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    headers = {"Content-Type": "application/json", "Authorization": "Bearer k"}
    for step in range(1, K + 2):
        body = json.dumps({"model": MODEL, "tools": [TOOL_DEF], "messages": messages}, separators=(",", ":"))
        response = await client.post(url, content=body.encode(), headers=headers)
        response.raise_for_status()
        message = json.loads(response.content)["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return step
        for call in message["tool_calls"]:
            n = json.loads(call["function"]["arguments"])["n"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(n)})
    raise AssertionError("the mock never answered")


def tether_agent(url: str, streaming: bool) -> Any:
    from tether import Agent, tool
    from tether.providers import OpenAICompatible

    @tool(effect="none")
    async def step(n: int) -> str:
        """Take one step."""
        return str(n)

    return Agent(OpenAICompatible(MODEL, base_url=url, api_key="k", stream=streaming), [step], max_steps=K + 5)


async def client_main(kind: str, concurrency: int, runs: int, port: int) -> dict[str, float]:
    import httpx

    base = f"http://127.0.0.1:{port}/v1"
    if kind == "bare":
        client = httpx.AsyncClient(limits=_limits(), timeout=60.0)

        async def one() -> int:
            return await bare_run(client, base + "/chat/completions")

        closer = client.aclose
    else:
        agent = tether_agent(base, streaming=kind == "tether-stream")

        async def one() -> int:
            result = await agent.run("go")
            assert result.status == "finished", result.error
            return result.usage.requests

        closer = agent.policy.aclose
    await asyncio.gather(*(one() for _ in range(min(concurrency, 20))))  # warm up: connections, imports
    semaphore = asyncio.Semaphore(concurrency)

    async def limited() -> int:
        async with semaphore:
            return await one()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    steps = sum(await asyncio.gather(*(limited() for _ in range(runs))))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await closer()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"steps": steps, "cpu_us_per_step": cpu / steps * 1e6, "steps_per_s": steps / wall, "rss_mb": rss}


def client(kind: str, concurrency: int, runs: int, port: int) -> None:
    print(json.dumps(asyncio.run(client_main(kind, concurrency, runs, port))), flush=True)


# -- the table ---------------------------------------------------------------------


def measure(kind: str, concurrency: int, runs: int, port: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--client", kind, str(concurrency), str(runs), str(port)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(quick: bool) -> None:
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        # (concurrent runs, runs, repetitions): the best repetition is kept (the machine is shared).
        plan = [(1, 100, 5), (100, 300, 1), (1000, 1000, 1)]
        if quick:
            plan = [(1, 50, 2), (100, 100, 1), (1000, 1000, 1)]
        print(
            f"bench_http: K={K} tool round-trips per run ({K + 1} requests), mock server pid {server.pid}, "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start\n"
        )
        rows = []
        for concurrency, runs, reps in plan:
            for kind in ("bare", "tether", "tether-stream"):
                best = min(
                    (measure(kind, concurrency, runs, port) for _ in range(reps)), key=lambda r: r["cpu_us_per_step"]
                )
                rows.append((kind, concurrency, runs, best))
        print(f"{'client':<14}{'concurrent':>11}{'runs':>7}{'CPU µs/step':>13}{'steps/s':>10}{'peak RSS MB':>13}")
        for kind, concurrency, runs, r in rows:
            print(
                f"{kind:<14}{concurrency:>11}{runs:>7}{r['cpu_us_per_step']:>13.0f}"
                f"{r['steps_per_s']:>10.0f}{r['rss_mb']:>13.1f}"
            )
        by = {(kind, c): r for kind, c, _, r in rows}
        print()
        for c in (1, 100, 1000):
            cpu_ratio = by[("tether", c)]["cpu_us_per_step"] / by[("bare", c)]["cpu_us_per_step"]
            rate_ratio = by[("tether", c)]["steps_per_s"] / by[("bare", c)]["steps_per_s"]
            print(
                f"tether / bare at {c:>5,} concurrent runs: CPU per step {cpu_ratio:.2f}x (target <= 1.5x), "
                f"steps/s {rate_ratio:.2f}x"
            )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--client"]:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main(quick="--quick" in sys.argv)
