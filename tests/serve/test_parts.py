"""The server's parts on their own: secrets, sessions, host names, views, HTML, the OpenAPI document, the hub."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
from pathlib import Path

import pytest

from tether import Action, Agent, FunctionPolicy, UserError, ask_human, tool
from tether.serve._cards import card
from tether.serve._html import json_html, story
from tether.serve._hub import Hub, wait_for
from tether.serve._openapi import document
from tether.serve._secrets import home_of, is_loopback, secret_file, server_key, server_token
from tether.serve._security import Sessions, Throttle, _hostname
from tether.serve._views import Views, view_of
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel


# Not support.refund: the inbox item's arguments and parameters are compared, an integer among them.
@tool(approval=True)
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


def test_a_secret_file_is_made_for_its_owner_only_and_refused_when_others_can_read_it(tmp_path: Path) -> None:
    path = tmp_path / "d" / "serve.token"
    assert secret_file(path, create=False) is None
    made = secret_file(path, create=True)
    assert made is not None and re.fullmatch(r"[0-9a-f]{64}", made)
    assert secret_file(path, create=True) == made  # kept, not made again
    os.chmod(path, 0o644)
    with pytest.raises(UserError, match="readable by others"):
        secret_file(path, create=False)


def test_where_the_secrets_live_and_where_they_come_from(tmp_path: Path) -> None:
    assert home_of("sqlite:////srv/app/runs.db") == Path("/srv/app")
    assert home_of("sqlite:///.tether/runs.db") == Path(".tether")
    assert home_of("postgresql://db/app") == Path(".tether")
    assert server_token(tmp_path, {"TETHER_SERVE_TOKEN": "x" * 40}, create=True) == "x" * 40
    with pytest.raises(UserError, match="at least 32"):
        server_token(tmp_path, {"TETHER_SERVE_TOKEN": "short"}, create=True)
    with pytest.raises(UserError, match="TETHER_SIGNING_KEY"):
        server_key("postgresql://db/app", {})
    key = server_key(f"sqlite:///{tmp_path}/runs.db", {})
    assert len(key) == 32 and (tmp_path / "signing.key").exists()
    assert server_key("postgresql://db/app", {"TETHER_SIGNING_KEY": "ab" * 16}) == bytes.fromhex("ab" * 16)
    assert [is_loopback(h) for h in ("127.0.0.2", "::1", "[::1]", "10.0.0.1", "example.org")] == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_a_session_lives_on_the_server_ends_at_revoke_and_expires() -> None:
    sessions = Sessions()
    cookie = sessions.issue("ana", person=False)
    who = sessions.read(cookie)
    assert who is not None and (who.kind, who.name, len(who.csrf)) == ("session", "ana", 32)
    assert Sessions().read(cookie) is None  # another server (or a restart) knows no such session
    assert sessions.read(cookie[:-1] + ("0" if cookie[-1] != "0" else "1")) is None
    assert sessions.read("garbage") is None
    assert who.reviewer() == "web:ana" and who.reviewer("bob") == "web:ana"  # a person cannot sign as another
    sessions.revoke(cookie)
    assert sessions.read(cookie) is None
    short = Sessions(ttl=-1)
    assert short.read(short.issue("ana", person=False)) is None


def test_wrong_tokens_are_counted_per_client_within_a_window() -> None:
    throttle = Throttle(limit=2, window=60)
    throttle.failed("a")
    assert throttle.retry_after("a") == 0
    throttle.failed("a")
    assert throttle.retry_after("a") > 0 and throttle.retry_after("b") == 0


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("[::1]:8765", "[::1]"),
        ("evil.example", "evil.example"),
    ],
)
def test_host_headers_are_reduced_to_their_names(header: str, name: str) -> None:
    assert _hostname(header) == name


async def _paused_events(*tools_and_replies: object) -> list:  # type: ignore[type-arg]
    store = MemoryStore()
    agent = Agent(ScriptedModel(list(tools_and_replies[1:])), tools_and_replies[0], store=store, name="support")  # type: ignore[arg-type]
    result = await agent.run("Refund A1 <b>now</b>", run_id="r1")
    assert result.status == "paused"
    return await store.load("r1")


def test_a_paused_runs_view_lists_its_items_with_hashes_schemas_and_times() -> None:
    events = asyncio.run(
        _paused_events(
            [refund, ask_human()],
            [Action("refund", {"order": "A1", "amount": 5}), Action("ask_human", {"question": "Why?"})],
        )
    )
    agent = Agent(ScriptedModel([]), [refund, ask_human()], name="support")
    view = view_of(events, {"support": agent})
    approval, question = view.items
    assert (approval.kind, approval.tool, approval.arguments) == ("approval", "refund", {"order": "A1", "amount": 5})
    assert approval.parameters == refund.parameters and approval.since > 0 and approval.decision is None
    assert (question.kind, question.question, question.answer_schema) == ("question", "Why?", {"type": "string"})
    assert view.task == "Refund A1 <b>now</b>" and view.waiting == view.items
    assert view.ever_called(approval.call_id) and not view.ever_called("nope")


def test_views_are_recomputed_only_when_the_run_grows() -> None:
    async def main() -> tuple[int, int]:
        store = MemoryStore()
        await Agent(ScriptedModel(["hi"]), store=store, name="a").run("hello", run_id="r1")
        loads = 0
        real = store.load

        async def counting(run_id: str) -> list:  # type: ignore[type-arg]
            nonlocal loads
            loads += 1
            return await real(run_id)

        store.load = counting  # type: ignore[method-assign]
        views = Views(store, {})
        first = await views.get("r1")
        second = await views.get("r1")
        assert first is second and await views.get("nope") is None
        return loads, (await views.get("r1")).seq  # type: ignore[union-attr]

    assert asyncio.run(main()) == (1, 3)


def test_json_and_stories_are_escaped_token_by_token() -> None:
    nasty = {"<k>": ["<script>alert(1)</script>", 1.5, True, None], "q": '"quoted"'}
    out = json_html(nasty)
    assert "<script>" not in out and "&lt;script&gt;" in out and "&lt;k&gt;" in out
    text = html.unescape(re.sub(r"<[^>]+>", "", out))
    assert json.loads(text) == nasty  # what is shown is the JSON itself
    events = asyncio.run(
        _paused_events([refund], Action("refund", {"order": "<img src=x onerror=alert(1)>", "amount": 1}))
    )
    assert "<img" not in story(events, "<b>agent</b>") and "&lt;b&gt;agent&lt;/b&gt;" in story(events, "<b>agent</b>")


def test_a_card_carries_the_hash_it_shows_and_nothing_inline() -> None:
    events = asyncio.run(_paused_events([refund], Action("refund", {"order": "A1", "amount": 5})))
    agent = Agent(ScriptedModel([]), [refund], name="support")
    view = view_of(events, {"support": agent})
    (item,) = view.items
    page = card(item, view, root="/tether", csrf="c" * 32, back="/")
    assert f'name="args_hash" value="{item.args_hash}"' in page
    assert 'action="/tether/decide"' in page and 'value="' + "c" * 32 + '"' in page
    assert " style=" not in page and "<script" not in page and " on" not in page.replace(" one", "")


def test_the_openapi_document_is_valid_openapi_3_1_and_names_the_agents() -> None:
    import jsonschema

    doc = document(["support", "echo"])
    assert doc["components"]["schemas"]["StartRun"]["properties"]["agent"]["enum"] == ["echo", "support"]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            assert {"401", "403", "429"} <= set(op["responses"]), (method, path)
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_the_hub_wakes_run_waiters_and_listeners_and_never_loses_a_change_between_looks() -> None:
    async def main() -> tuple[bool, bool, list[str]]:
        hub = Hub()
        with hub.subscription("r1") as flag, hub.listen() as listener:
            flag.clear()
            hub.changed("r1")  # lands before the wait starts: still seen
            woke = await wait_for(flag, 5)
            quiet = await hub.wait("r2", 0.01)
            hub.changed("r2")
            hub.changed("r2")
            return woke, quiet, listener.take()

    assert asyncio.run(main()) == (True, False, ["r1", "r2"])


def test_a_server_refuses_agents_it_cannot_serve(tmp_path: Path) -> None:
    from tether.serve import Server

    one = Agent(FunctionPolicy(lambda c, t: "x"), name="a")
    with pytest.raises(UserError, match="two served agents are named 'a'"):
        Server([one, one], store="memory://")
    with pytest.raises(UserError, match="give the server a store"):
        Server([one])
    keyed = Agent(FunctionPolicy(lambda c, t: "x"), name="b", signing_key=b"k" * 32)
    other = Agent(FunctionPolicy(lambda c, t: "x"), name="c", signing_key=b"j" * 32)
    with pytest.raises(UserError, match="different signing keys"):
        Server([keyed, other], store="memory://")
    server = Server([keyed], store="memory://", host="127.0.0.1")
    assert server.key == b"k" * 32 and server.agents["b"] is not keyed and keyed.store is None  # served copies
    with pytest.raises(UserError, match="needs a token"):
        Server([one], store=f"sqlite:///{tmp_path}/runs.db", host="0.0.0.0", env={})


def test_importing_tether_does_not_import_the_web_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tether, tether.stores, tether.dispatch; print(sorted({'starlette', 'uvicorn'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
