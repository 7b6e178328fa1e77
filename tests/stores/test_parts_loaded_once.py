"""Loading a run decodes each part's bytes once: every event naming it shares one bytes object."""

from __future__ import annotations

import os

from support import refund
from tether import Action, Agent, record_decisions
from tether.messages import Message
from tether.parts import Image, Text
from tether.stores._blobs import _messages
from tether.testing import ScriptedModel

from .conftest import Backend


async def test_a_part_named_by_many_events_is_one_bytes_object_once_loaded(backend: Backend) -> None:
    store = await backend.open()
    shot = Image(b"\x89PNG\r\n\x1a\n" + os.urandom(64 * 1024), "image/png")
    await Agent(ScriptedModel([Action("refund", {"order": "0"})]), [refund], store=store).run(
        Message.user(Text("look"), shot), run_id="r1"
    )
    for i in range(1, 4):  # each pause's state carries the notebook, image and all
        await record_decisions(store, "r1", lambda s: s.approve(s.open_calls[0].call.id))
        await Agent(ScriptedModel([Action("refund", {"order": str(i)})]), [refund], store=store).run(run_id="r1")
    loaded = await (await backend.open()).load("r1")
    found = [
        p.data
        for ev in loaded
        for m in _messages(ev)
        if not isinstance(m.content, str)
        for p in m.content
        if isinstance(p, Image)
    ]
    assert len(found) >= 5 and all(d == shot.data for d in found)
    assert len({id(d) for d in found}) == 1
