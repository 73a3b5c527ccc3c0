"""Linking across two channels, through the whole stack: memory and history follow the learner.

One gateway runs the web chat and the relay plugin channel (an emulated Bot-API platform);
the learner talks on the web, links from the relay platform with /link CODE, and the next
request the model gets for the relay chat carries what was said and noted on the web.
"""

from __future__ import annotations

import re
import uuid

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import eventually
from tests.e2e.rig import PARTNER, WebLearner, accepting, e2e_config, served
from tests.peers.model_stub import Reply
from tests.peers.relay_platform import RelayClient


def both_channels(tmp_path, api_base, relay_url, variable):
    # allow_from "*": everyone here is a learner (strangers get no memory_write, by the house rule)
    access = {"dm": "open", "allow_from": ["*"]}
    raw = e2e_config(tmp_path / "data", api_base, account_settings={"access": access})
    raw["channels"]["relay"] = {"main": {"access": access, "base_url": relay_url, "token": f"env:{variable}",
                                         "poll_timeout": 2}}
    raw["bindings"].append({"partner": PARTNER, "channel": "relay", "account": "main"})
    return parse_config(raw)


async def test_memory_and_history_follow_a_linked_learner_to_another_channel(relay_peer, stub, tmp_path, monkeypatch):
    token, variable = f"tok-{uuid.uuid4().hex}", f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    await accepting(relay_peer.url)
    client = RelayClient(relay_peer.url, token)
    await client.register()
    gateway = Gateway(both_channels(tmp_path, stub.api_base, relay_peer.url, variable))
    await gateway.start()
    try:
        async with served(gateway) as url:
            web = await WebLearner(url).open()
            # On the web: the learner says when the exam is; the model notes it.
            stub.script(Reply.tool_calls(("memory_write", {"text": "Ann's maths exam is on Friday", "key": "exam_date"})),
                        Reply.text("Noted, good luck on Friday!"))
            await web.say("My maths exam is on Friday")
            await web.wait_for(lambda page: len(page.finished()) >= 1, what="the first answer")
            await web.say("/link")
            shown = await web.wait_for(lambda page: len(page.finished()) >= 2 and page.finished()[-1], what="the link code")
            code = re.search(r"\b([A-Z0-9]{8})\b", shown.text).group(1)
            requests_before = len(stub.requests)

            # On the relay platform: confirm the code, then ask.
            await client.inject("ann-relay", "ann-relay", f"/link {code}")
            confirmed = await eventually(lambda: _last(client, "ann-relay", "Linked"), what="the link confirmation")
            assert confirmed
            assert len(stub.requests) == requests_before  # commands never reach the model
            stub.script(Reply.text("Your exam is on Friday."))
            await client.inject("ann-relay", "ann-relay", "When is my exam again?")
            await eventually(lambda: _last(client, "ann-relay", "Your exam is on Friday."), what="the answer on relay")

            request = said_to_model(stub.requests[-1])
            assert "Ann's maths exam is on Friday" in request  # the memory followed
            assert "My maths exam is on Friday" in request  # and so did the history

            # Unlinked, the relay account starts fresh.
            await client.inject("ann-relay", "ann-relay", "/unlink")
            await eventually(lambda: _last(client, "ann-relay", "Unlinked"), what="the unlink confirmation")
            stub.script(Reply.text("I don't know yet."))
            await client.inject("ann-relay", "ann-relay", "When is my exam?")
            await eventually(lambda: _last(client, "ann-relay", "I don't know yet."), what="the fresh answer")
            fresh = said_to_model(stub.requests[-1])
            assert "Ann's maths exam is on Friday" not in fresh and "My maths exam is on Friday" not in fresh
            await web.close()
    finally:
        await gateway.stop()
        await client.aclose()


def said_to_model(request) -> str:
    return "\n".join(m.get("content") or "" for m in request["messages"])


async def _last(client, chat, starts):
    messages = (await client.sent()).get(chat, [])
    return bool(messages) and messages[-1]["text"].startswith(starts)
