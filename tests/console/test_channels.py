"""The channels page and the dashboard over real HTTP, against a served gateway with web chat accounts.

Web chat accounts ``algebra`` (Ada's partner), ``biology`` (Ben's), ``lobby`` (algebra for the whole
account, biology for one chat: both teachers see it, neither may operate it) and ``spare`` (bound to
nobody: an administrator's only).  A learner speaks through the web chat's own HTTP API.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from gateway.activity import quantile
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.config import Config
from gateway.store.console import Role
from tests.console.rig import ADA_ID, BEN_ID, Quiet, Served, client, console_config, csrf_of, signed_in, user
from tests.e2e.rig import WebLearner, served
from tests.waits import HANG_S

ACCOUNTS = ["webchat:algebra", "webchat:biology", "webchat:lobby", "webchat:spare"]
SEEN = {"root": ACCOUNTS, "ada": ["webchat:algebra", "webchat:lobby"], "ben": ["webchat:biology", "webchat:lobby"]}


def channels_config(data_dir: Path) -> Config:
    raw: dict[str, Any] = console_config(data_dir).model_dump(mode="json", exclude={"source"})
    open_dm = {"access": {"dm": "open"}}
    raw["channels"] = {"webchat": {name: open_dm for name in ("algebra", "biology", "lobby", "spare")}}
    raw["bindings"] = [{"partner": "algebra", "channel": "webchat", "account": "algebra"},
                       {"partner": "biology", "channel": "webchat", "account": "biology"},
                       {"partner": "algebra", "channel": "webchat", "account": "lobby"},
                       {"partner": "biology", "channel": "webchat", "account": "lobby", "chat": "some-chat"}]
    raw["pipeline"] = {"coalesce_window_s": 0, "shutdown_drain_s": 1}
    return parse_config(raw)


@contextlib.asynccontextmanager
async def serve_channels(data_dir: Path, *, with_users: bool = True) -> AsyncIterator[Served]:
    async with Gateway(channels_config(data_dir), responder=Quiet()) as gateway, served(gateway) as url:
        if with_users:
            for made in (user("root", Role.ADMINISTRATOR), user("ada", Role.TEACHER, ADA_ID), user("ben", Role.TEACHER, BEN_ID)):
                assert await gateway.store.add_console_user(made)
        yield Served(url, gateway)


async def answered(url: str, account: str, text: str) -> None:
    """A learner on the web chat account says ``text`` and waits for the partner's answer."""
    learner = await WebLearner(url, account=account).open()
    try:
        await learner.say(text)
        await learner.wait_for(lambda page: page.finished(), what="the answer")
    finally:
        await learner.close()


async def states(http) -> dict[str, dict[str, Any]]:
    listed = (await http.get("/console/api/channels")).json()["accounts"]
    return {f"{a['channel']}:{a['account']}": a for a in listed}


async def until_state(http, account: str, state: str) -> dict[str, Any]:
    """Poll the JSON twin until ``account`` is in ``state``; the deadline only bounds a hang."""
    import asyncio

    async with asyncio.timeout(HANG_S):
        while (found := (await states(http))[account])["state"] != state:
            await asyncio.sleep(0.02)
    return found


@pytest.mark.parametrize("viewer", ["root", "ada", "ben"])
async def test_each_viewer_sees_only_their_accounts_and_operates_only_their_own(tmp_path: Path, viewer: str):
    async with serve_channels(tmp_path / "data") as running, aclosing(await signed_in(running.url, viewer)) as http:
        listed = await until_state(http, SEEN[viewer][0], "running")
        seen = await states(http)
        assert sorted(seen) == SEEN[viewer]
        assert listed["reason"] == "" and listed["partners"]
        assert seen["webchat:lobby"]["partners"] == ["algebra", "biology"]
        assert seen["webchat:lobby"]["operable"] is (viewer == "root")
        page = (await http.get("/console/channels")).text
        for account in ACCOUNTS:
            assert (f'data-account="{account}"' in page) == (account in SEEN[viewer])
        csrf = await csrf_of(http)
        unseen = next(a for a in ACCOUNTS if a not in SEEN[viewer]) if viewer != "root" else None
        if unseen is not None:  # not theirs: as if it did not exist
            channel, account = unseen.split(":")
            refused = await http.post(f"/console/api/channels/{channel}/{account}/disable", headers={"x-csrf-token": csrf})
            assert refused.status_code == 404, refused.text
            shared = await http.post("/console/api/channels/webchat/lobby/disable", headers={"x-csrf-token": csrf})
            assert shared.status_code == 403, shared.text  # another teacher's partner answers there too
            assert (await states(http))["webchat:lobby"]["state"] == "running"
        missing = await http.post("/console/api/channels/webchat/nowhere/disable", headers={"x-csrf-token": csrf})
        assert missing.status_code == 404
        wrong = await http.post(f"/console/api/channels/{SEEN[viewer][0].replace(':', '/')}/explode",
                                headers={"x-csrf-token": csrf})
        assert wrong.status_code == 404


async def test_disabled_stays_stopped_across_a_restart_and_enable_brings_it_back(tmp_path: Path):
    data = tmp_path / "data"
    async with serve_channels(data) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        await until_state(ada, "webchat:algebra", "running")
        csrf = await csrf_of(ada)
        page = await ada.post("/console/channels/webchat/algebra/disable", data={"csrf": csrf})
        assert page.status_code == 303 and page.headers["location"] == "/console/channels"
        now = (await states(ada))["webchat:algebra"]
        assert (now["state"], now["reason"], now["disabled_by"]) == ("stopped", "disabled in the console by ada", "ada")
        assert (await states(ada))["webchat:lobby"]["state"] == "running"  # only that one
        async with client(running.url) as page:  # its web chat is off too: refused, to be tried again later
            off = await page.post("/channels/webchat/algebra/api/session", json={})
            assert off.status_code == 503 and "disabled in the console by ada" in off.json()["error"]
            assert off.headers["retry-after"] == "60"
            assert (await page.post("/channels/webchat/lobby/api/session", json={})).status_code == 200
        shown = (await ada.get("/console/channels")).text
        assert 'data-account="webchat:algebra" data-state="stopped"' in shown
        assert "disabled in the console by ada" in shown
        refused = await ada.post("/console/api/channels/webchat/algebra/restart", headers={"x-csrf-token": csrf})
        assert refused.status_code == 409, refused.text

    async with serve_channels(data, with_users=False) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        after = (await states(ada))["webchat:algebra"]
        assert (after["state"], after["reason"]) == ("stopped", "disabled in the console by ada")
        assert (await running.gateway.status()).accounts  # /status says the same
        assert {a.account: a.state for a in (await running.gateway.status()).accounts}["algebra"] == "stopped"
        csrf = await csrf_of(ada)
        enabled = await ada.post("/console/api/channels/webchat/algebra/enable", headers={"x-csrf-token": csrf})
        assert enabled.status_code == 200 and enabled.json()["disabled_by"] is None
        back = await until_state(ada, "webchat:algebra", "running")
        assert back["reason"] == ""
        await answered(running.url, "algebra", "back again")  # 202: accepted once more
        restarted = await ada.post("/console/api/channels/webchat/algebra/restart", headers={"x-csrf-token": csrf})
        assert restarted.status_code == 200, restarted.text
        again = await until_state(ada, "webchat:algebra", "running")
        assert again["restarts"] >= 1

    async with serve_channels(data, with_users=False) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        assert (await until_state(ada, "webchat:algebra", "running"))["disabled_by"] is None  # enabled stays enabled


async def test_the_dashboard_counts_an_exchange_and_a_drop_and_keeps_them_across_a_restart(tmp_path: Path):
    data = tmp_path / "data"
    async with serve_channels(data) as running:
        await answered(running.url, "algebra", "hello")
        stranger = await WebLearner(running.url, account="spare").open()  # bound to no partner: dropped
        try:
            await stranger.say("anyone?")
        finally:
            await stranger.close()
        async with aclosing(await signed_in(running.url, "ada")) as ada:
            day = await until_dropped(ada, root=False)
            assert (day["totals"]["messages_in"], day["totals"]["messages_out"]) == (1, 1)
            assert day["totals"]["latency_p50_s"] is not None and day["totals"]["latency_p99_s"] >= day["totals"]["latency_p50_s"]
            assert [(r["partner"], r["account"]) for r in day["rows"]] == [("algebra", "algebra")]
            assert day["drops_by_reason"] == {}  # the drop was on an account no partner of hers uses
            assert len(day["buckets"]) == 24 and sum(b["messages_in"] for b in day["buckets"]) == 1
            page = (await ada.get("/console/dashboard")).text
            assert '<dd data-total="in">1</dd>' in page and '<dd data-total="out">1</dd>' in page
            assert page.count("<svg") == 3 and 'class="bar in"' in page
        async with aclosing(await signed_in(running.url, "ben")) as ben:
            nothing = (await ben.get("/console/api/dashboard")).json()
            assert nothing["totals"]["messages_in"] == 0 and nothing["rows"] == []
        async with aclosing(await signed_in(running.url, "root")) as root:
            everything = await until_dropped(root, root=True)
            assert everything["totals"]["messages_in"] == 2 and everything["totals"]["drops"] == 1

    async with serve_channels(data, with_users=False) as running, aclosing(await signed_in(running.url, "root")) as root:
        week = (await root.get("/console/api/dashboard?span=week")).json()
        assert len(week["buckets"]) == 7
        assert (week["totals"]["messages_in"], week["totals"]["messages_out"], week["totals"]["drops"]) == (2, 1, 1)
        assert sum(week["drops_by_reason"].values()) == 1
        assert (await root.get("/console/api/dashboard?span=year")).status_code == 400
        html = (await root.get("/console/dashboard?span=week")).text
        assert "data-drop=" in html and '<dd data-total="drops">1</dd>' in html


async def until_dropped(http, *, root: bool) -> dict[str, Any]:
    """The day's summary once the exchange and its latency (and, for root, the drop) are counted; the
    deadline bounds a hang."""
    import asyncio

    async with asyncio.timeout(HANG_S):
        while True:
            day = (await http.get("/console/api/dashboard")).json()
            totals = day["totals"]  # the latency is observed just after the last part is counted out
            if totals["latency_p50_s"] is not None and (not root or totals["drops"] >= 1):
                return day
            await asyncio.sleep(0.05)


def test_quantiles_come_from_cumulative_buckets():
    assert quantile({}, 0.5) is None
    assert quantile({"0.5": 0, "1.0": 0, "+Inf": 0}, 0.5) is None
    assert quantile({"1.0": 10, "2.0": 10, "+Inf": 10}, 0.5) == pytest.approx(0.5)
    assert quantile({"1.0": 0, "2.0": 10, "+Inf": 10}, 0.5) == pytest.approx(1.5)
    assert quantile({"1.0": 5, "2.0": 5, "+Inf": 10}, 0.99) == 2.0  # above the last bound: that bound
