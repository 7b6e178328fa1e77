"""HTTP provider benchmark: tether (Agent + OpenAICompatible) against a bare httpx loop.

The set-up of issue 26, read as ratios (the machine is shared):

* ONE ``Agent`` with ONE ``OpenAICompatible`` provider (so one httpx client) is
  shared by C asyncio tasks; each task runs ``agent.run(prompt)``: K = 10
  sequential calls of an async ``add(a, b)`` tool, then a final answer;
* the server is a loopback OpenAI-compatible mock (stdlib asyncio,
  non-streaming JSON, pre-rendered replies) in its own process;
* one round of C runs at once (at C = 1, a round is 20 runs one after another);
* CPU per step is ``time.process_time()`` over the round divided by the steps
  (tool calls plus finished runs); steps/s is the same count over wall time;
* the baseline is a hand-written loop with one shared ``httpx.AsyncClient``
  that posts the same JSON and parses the same replies.

Each round runs in a fresh client process, tether and bare interleaved
(tether, bare, tether, bare, ...); the table gives the median of the rounds.

Run: python bench/bench_http.py [--quick] [--rounds N]   (prints a table; nothing here is a test)

The mock serves ``K`` tool round-trips by default; a base URL ending in
``/k<N>`` asks for N instead (bench_growth.py uses that for long histories).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, ClassVar

K = 10  # tool round-trips per run
MODEL = "bench-model"
ADD_DEF = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "type": "object",
        },
    },
}

# -- the mock server -------------------------------------------------------------


def reply(i: int, k: int) -> bytes:
    """The HTTP response to a request that already holds ``i`` tool results, in a run of ``k``."""
    if i < k:
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": f'{{"a":{i},"b":1}}'}}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        message = {"role": "assistant", "content": "All steps taken."}
    usage = {"prompt_tokens": 100 + i, "completion_tokens": 10, "total_tokens": 110 + i}
    finish = "tool_calls" if i < k else "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    data = {"id": "x", "object": "chat.completion", "created": 0, "model": MODEL, "choices": [choice], "usage": usage}
    body = json.dumps(data).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body


class _MockProtocol(asyncio.Protocol):
    cache: ClassVar[dict[tuple[int, int], bytes]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end]
            length = _content_length(head)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            k = _k_of(head)
            key = (min(body.count(b'"role":"tool"'), k), k)
            if key not in self.cache:
                self.cache[key] = reply(*key)
            self.transport.write(self.cache[key])


def _content_length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line[15:])
    return 0


def _k_of(head: bytes) -> int:
    for part in head.split(b" ", 2)[1].split(b"/"):
        if part[:1] == b"k" and part[1:].isdigit():
            return int(part[1:])
    return K


def serve() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_MockProtocol, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()

    asyncio.run(main())


def start_server() -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, int(server.stdout.readline())


# -- the two clients -----------------------------------------------------------------


async def bare_run(client: Any, url: str, tools: list[dict[str, Any]]) -> int:
    """The same conversation with nothing but httpx and json; returns its steps."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    headers = {"Content-Type": "application/json", "Authorization": "Bearer k"}
    steps = 0
    while True:
        body = json.dumps({"model": MODEL, "messages": messages, "tools": tools}, separators=(",", ":"))
        response = await client.post(url, content=body.encode(), headers=headers)
        response.raise_for_status()
        message = json.loads(response.content)["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return steps + 1
        for call in message["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(args["a"] + args["b"])})
            steps += 1


def tether_agent(base_url: str, extra_tools: int = 0, max_steps: int = K + 5) -> Any:
    from tether import Agent, tool
    from tether.providers import OpenAICompatible

    @tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return Agent(
        OpenAICompatible(MODEL, base_url=base_url, api_key="k", stream=False),
        [add, *filler_tools(extra_tools)],
        max_steps=max_steps,
    )


def filler_tools(n: int) -> list[Any]:
    """``n`` more tools offered (never called), each with a small schema like add's."""
    from tether import tool

    def make(i: int) -> Any:
        async def fn(a: int, b: int) -> int:
            return a * i + b

        fn.__name__ = f"tool_{i}"
        fn.__doc__ = f"Tool number {i}."
        return tool(effect="none")(fn)

    return [make(i) for i in range(n)]


def filler_defs(n: int) -> list[dict[str, Any]]:
    """What the bare loop offers for the same ``n`` extra tools."""
    out = []
    for i in range(n):
        d = json.loads(json.dumps(ADD_DEF))
        d["function"].update(name=f"tool_{i}", description=f"Tool number {i}.")
        out.append(d)
    return out


async def round_of(kind: str, concurrency: int, runs: int, base_url: str, extra_tools: int = 0) -> dict[str, float]:
    """One measured round in this process: ``runs`` runs, ``concurrency`` at once."""
    import httpx

    if kind == "bare":
        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100))
        url, tools = base_url + "/chat/completions", [ADD_DEF, *filler_defs(extra_tools)]

        async def one() -> int:
            return await bare_run(client, url, tools)

        closer = client.aclose
    else:
        k = int(base_url.rsplit("/k", 1)[1]) if "/k" in base_url else K
        agent = tether_agent(base_url, extra_tools, max_steps=k + 5)

        async def one() -> int:
            result = await agent.run("go")
            assert result.status == "finished", result.error
            return result.usage.requests  # K tool calls + 1 finished run

        closer = agent.policy.aclose
    await asyncio.gather(*(one() for _ in range(min(concurrency, 20))))  # warm up: connections, imports
    waves = [concurrency] * (runs // concurrency)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    steps = 0
    for wave in waves:
        steps += sum(await asyncio.gather(*(one() for _ in range(wave))))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await closer()
    return {"steps": steps, "cpu_us_per_step": cpu / steps * 1e6, "steps_per_s": steps / wall}


def client(argv: list[str]) -> None:
    kind, concurrency, runs, base_url, extra = argv[0], int(argv[1]), int(argv[2]), argv[3], int(argv[4])
    print(json.dumps(asyncio.run(round_of(kind, concurrency, runs, base_url, extra))), flush=True)


def measure(kind: str, concurrency: int, runs: int, base_url: str, extra_tools: int = 0) -> dict[str, float]:
    """One round in a fresh client process."""
    argv = [sys.executable, __file__, "--client", kind, str(concurrency), str(runs), base_url, str(extra_tools)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- the table ---------------------------------------------------------------------


def main(quick: bool, rounds: int) -> None:
    server, port = start_server()
    base = f"http://127.0.0.1:{port}/v1"
    # (concurrent runs, runs per round)
    plan = [(1, 20), (100, 100), (1000, 1000)]
    try:
        print(
            f"bench_http: K={K} add() calls per run, {rounds} interleaved rounds per row (median), "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start"
        )
        print(f"{'concurrent':>10}{'bare µs/step':>14}{'tether µs/step':>16}{'CPU ratio':>11}{'steps/s ratio':>15}")
        for concurrency, runs in plan:
            got: dict[str, list[dict[str, float]]] = {"tether": [], "bare": []}
            for _ in range(1 if quick and concurrency == 1000 else rounds):
                for kind in ("tether", "bare"):
                    got[kind].append(measure(kind, concurrency, runs, base))
            cpu = {k: statistics.median(r["cpu_us_per_step"] for r in v) for k, v in got.items()}
            rate = {k: statistics.median(r["steps_per_s"] for r in v) for k, v in got.items()}
            print(
                f"{concurrency:>10,}{cpu['bare']:>14.0f}{cpu['tether']:>16.0f}"
                f"{cpu['tether'] / cpu['bare']:>10.2f}x{rate['tether'] / rate['bare']:>14.2f}x",
                flush=True,
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end; read the ratios, not the µs (targets: CPU <= 1.5x)")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--client"]:
        client(sys.argv[2:])
    else:
        n = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
        main(quick="--quick" in sys.argv, rounds=n)
