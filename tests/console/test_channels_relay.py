"""A polling channel under the console's switches: the relay plugin against its emulated platform.

Disabling the account stops its long poll; what learners say meanwhile stays queued on the platform
(unconfirmed) and is answered once the account is enabled again.  A send the platform refuses once
(503) is retried, and the dashboard counts the error beside the message in and out.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import aclosing
from pathlib import Path

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.store.console import Role
from tests.console.rig import Quiet, csrf_of, signed_in, user
from tests.console.test_channels import until_state
from tests.e2e.rig import accepting, e2e_config, served
from tests.peers.relay_platform import RelayClient
from tests.waits import HANG_S


async def replies(client: RelayClient, chat: str, count: int) -> list[dict]:
    async with asyncio.timeout(HANG_S):
        while len(found := (await client.sent()).get(chat, [])) < count:
            await asyncio.sleep(0.05)
    return found


async def test_disable_stops_the_poll_and_enable_answers_what_waited(relay_peer, tmp_path: Path, monkeypatch):
    token, variable = f"tok-{uuid.uuid4().hex}", f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    await accepting(relay_peer.url)
    async with aclosing(RelayClient(relay_peer.url, token)) as platform:
        await platform.register()
        raw = e2e_config(tmp_path / "data", "http://127.0.0.1:9", channel="relay", account="main",
                         account_settings={"base_url": relay_peer.url, "token": f"env:{variable}", "poll_timeout": 2})
        raw["partners"][0].pop("model")
        raw["partners"][0]["owners"] = [{"channel": "telegram", "user": "700"}]
        async with Gateway(parse_config(raw), responder=Quiet()) as gateway, served(gateway) as url:
            assert await gateway.store.add_console_user(user("root", Role.ADMINISTRATOR))
            async with aclosing(await signed_in(url, "root")) as root:
                await until_state(root, "relay:main", "running")
                await platform.faults(next=["503"])  # the first reply's send is refused once, posting nothing
                await platform.inject("c1", "u1", "hello")
                assert [m["text"] for m in await replies(platform, "c1", 1)] == ["ok"]

                csrf = await csrf_of(root)
                assert (await root.post("/console/api/channels/relay/main/disable", headers={"x-csrf-token": csrf})).status_code == 200
                stopped = (await until_state(root, "relay:main", "stopped"))
                assert stopped["reason"] == "disabled in the console by root"
                await platform.inject("c1", "u1", "are you there?")  # waits on the platform, unconfirmed
                assert len((await platform.sent())["c1"]) == 1
                assert (await root.post("/console/api/channels/relay/main/enable", headers={"x-csrf-token": csrf})).status_code == 200
                await until_state(root, "relay:main", "running")
                assert [m["text"] for m in await replies(platform, "c1", 2)] == ["ok", "ok"]  # nothing was lost

                async with asyncio.timeout(HANG_S):
                    while ((day := (await root.get("/console/api/dashboard")).json())["totals"]["messages_out"] < 2
                           or day["totals"]["drops"] < 2  # the second reply's echo comes in after it went out
                           or (day["rows"] and day["rows"][0]["latency_p99_s"] is None)):
                        await asyncio.sleep(0.05)
                # The relay shows the bot its own replies as updates, as a group chat does: in 4, two of them dropped.
                assert (day["totals"]["messages_in"], day["totals"]["messages_out"], day["totals"]["errors"]) == (4, 2, 1)
                assert day["drops_by_reason"] == {"own message": 2}
                assert day["errors_by_kind"] == {"PeerUnavailable": 1}  # the 503, retried
                [row] = day["rows"]
                assert (row["partner"], row["channel"], row["account"], row["errors"]) == ("buddy", "relay", "main", 1)
                assert row["latency_p99_s"] is not None


class Held:
    """A responder whose answer waits until the test lets it go: a turn still running when the account is disabled."""

    name = "held"

    def __init__(self) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def respond(self, turn):
        from gateway.core.events import StreamEnd, TurnEnd

        self.started.set()
        await self.release.wait()
        yield StreamEnd(markdown="answered after all")
        yield TurnEnd()


async def test_a_turn_running_when_the_account_is_disabled_is_still_answered(relay_peer, tmp_path: Path, monkeypatch):
    """Disabling stops what comes in, not what was already taken: the learner who wrote before the switch
    gets their answer, once, and nothing is given up as undeliverable."""
    token, variable = f"tok-{uuid.uuid4().hex}", f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    await accepting(relay_peer.url)
    held = Held()
    async with aclosing(RelayClient(relay_peer.url, token)) as platform:
        await platform.register()
        raw = e2e_config(tmp_path / "data", "http://127.0.0.1:9", channel="relay", account="main",
                         account_settings={"base_url": relay_peer.url, "token": f"env:{variable}", "poll_timeout": 2})
        raw["partners"][0].pop("model")
        async with Gateway(parse_config(raw), responder=held) as gateway, served(gateway) as url:
            assert await gateway.store.add_console_user(user("root", Role.ADMINISTRATOR))
            async with aclosing(await signed_in(url, "root")) as root:
                await until_state(root, "relay:main", "running")
                await platform.inject("c1", "u1", "a long question")
                async with asyncio.timeout(HANG_S):
                    await held.started.wait()
                csrf = await csrf_of(root)
                assert (await root.post("/console/api/channels/relay/main/disable", headers={"x-csrf-token": csrf})).status_code == 200
                await until_state(root, "relay:main", "stopped")
                held.release.set()
                assert [m["text"] for m in await replies(platform, "c1", 1)] == ["answered after all"]
                assert gateway.delivery.undelivered.of("relay", "main").count == 0  # nothing given up or sent short
                await gateway.lanes.drain()
                assert [m["text"] for m in (await platform.sent())["c1"]] == ["answered after all"]  # once
