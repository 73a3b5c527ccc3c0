"""Webhook mode: Telegram POSTs updates to the gateway's HTTP app; the secret token decides who is Telegram.

The emulator plays Telegram: after setWebhook it POSTs each update with
``X-Telegram-Bot-Api-Secret-Token`` and keeps retrying it until it gets a 2xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import sqlite3
import uuid
from contextlib import closing

import httpx

import channels._kit.signatures as kit_signatures
from gateway.http.app import build_app
from gateway.http.server import serve_http
from tests.channels.telegram.conftest import free_port, new_id
from tests.contract.harness import counter, eventually
from tests.waits import HTTP_S

SECRET = "s3cret_Token-for-the-webhook"


@contextlib.asynccontextmanager
async def webhook_rig(open_rig, *, serve: bool = True):
    port = free_port()
    env = f"TELEGRAM_HOOK_{uuid.uuid4().hex[:8].upper()}"
    os.environ[env] = SECRET
    try:
        rig = await open_rig(mode="webhook", webhook_url=f"http://127.0.0.1:{port}/webhooks/telegram/main",
                             webhook_secret=f"env:{env}")
        url = f"http://127.0.0.1:{port}"
        server = asyncio.create_task(serve_http(build_app(rig.gateway), "127.0.0.1", port, shutdown_timeout=1)) if serve else None
        try:
            async with httpx.AsyncClient(base_url=url, timeout=HTTP_S, trust_env=False) as http:
                yield rig, http, port
        finally:
            if server is not None:
                server.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await server
    finally:
        os.environ.pop(env, None)


def update(update_id: int, chat: int, text: str) -> dict:
    return {"update_id": update_id, "message": {
        "message_id": update_id, "date": 1_700_000_000, "text": text,
        "chat": {"id": chat, "type": "private", "first_name": "Ann"}, "from": {"id": chat, "is_bot": False, "first_name": "Ann"}}}


def inbound_rows(rig, event_id: str) -> int:
    with closing(sqlite3.connect(rig.gateway.config.database_path)) as db:
        return db.execute("SELECT count(*) FROM inbound WHERE channel = 'telegram' AND event_id = ?", (event_id,)).fetchone()[0]


async def test_updates_pushed_before_the_endpoint_listens_are_retried_and_answered_once(open_rig):
    async with webhook_rig(open_rig, serve=False) as (rig, _, port):
        info = await eventually(lambda: _webhook(rig), what="setWebhook")
        assert info["url"] == f"http://127.0.0.1:{port}/webhooks/telegram/main" and info["secret_token"] == SECRET
        chat = new_id()
        await rig.users.say(chat, "anyone there?")
        await eventually(lambda: _failures(rig), what="a failed push (nothing listens yet)")
        server = asyncio.create_task(serve_http(build_app(rig.gateway), "127.0.0.1", port, shutdown_timeout=1))
        try:
            [reply] = await rig.replies(chat, 1)
            await rig.quiet()
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
        assert "anyone there?" in reply["text"]
        assert len(rig.responder.turns) == 1
        assert (await rig.users.info())["queued"] == []  # the 200 confirmed it


async def _webhook(rig):
    return (await rig.users.info())["webhook"]


async def _failures(rig):
    return ((await rig.users.info())["webhook"] or {}).get("failures", 0) >= 1


async def test_a_forged_or_missing_secret_is_refused_with_401_and_compared_in_constant_time(open_rig, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(kit_signatures.hmac, "compare_digest", spy)  # the kit compares for the channel
    async with webhook_rig(open_rig) as (rig, http, _):
        chat = new_id()
        body = update(900001, chat, "let me in")
        forged = await http.post("/webhooks/telegram/main", json=body, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"})
        missing = await http.post("/webhooks/telegram/main", json=body)
        assert (forged.status_code, missing.status_code) == (401, 401)
        assert compared and all(b == SECRET.encode() for _, b in compared)
        assert inbound_rows(rig, "900001") == 0
        assert rig.responder.turns == [] and str(chat) not in await rig.users.seen()


async def test_an_update_is_durable_before_the_webhook_answers_200_and_a_repeat_is_answered_once(open_rig):
    async with webhook_rig(open_rig) as (rig, http, _):
        chat = new_id()
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        await rig.users.open_chat({"id": chat, "type": "private"})
        await eventually(lambda: _webhook(rig), what="setWebhook")
        answer = await http.post("/webhooks/telegram/main", json=update(900002, chat, "durable?"), headers=headers)
        assert answer.status_code == 200
        assert inbound_rows(rig, "900002") == 1  # in the inbox by the time Telegram hears 200
        await rig.replies(chat, 1)
        again = await http.post("/webhooks/telegram/main", json=update(900002, chat, "durable?"), headers=headers)
        assert again.status_code == 200
        await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="telegram") >= 1,
                         what="the repeat to be recognised")
        await rig.quiet()
        assert len((await rig.users.seen())[str(chat)]) == 1


async def test_a_body_that_is_not_json_is_a_400_and_an_unreadable_update_is_recorded_and_acknowledged(open_rig):
    async with webhook_rig(open_rig) as (rig, http, _):
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        broken = await http.post("/webhooks/telegram/main", content=b"{not json", headers=headers)
        assert broken.status_code == 400 and "not JSON" in broken.json()["error"]
        odd = await http.post("/webhooks/telegram/main", json={"update_id": 900003, "poll": {"id": "1"}}, headers=headers)
        assert odd.status_code == 200  # acknowledged: Telegram would retry an unreadable update forever
        assert counter(rig.gateway, "partners_dropped_total", channel="telegram", reason="invalid event") == 1


async def test_a_polling_account_has_no_webhook(open_rig):
    rig = await open_rig()
    port = free_port()
    server = asyncio.create_task(serve_http(build_app(rig.gateway), "127.0.0.1", port, shutdown_timeout=1))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=HTTP_S, trust_env=False) as http:
            answer = await eventually(lambda: _post_quietly(http), what="the HTTP app")
        assert answer.status_code == 404
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server


async def _post_quietly(http):
    try:
        return await http.post("/webhooks/telegram/main", json=update(1, 1, "x"))
    except httpx.ConnectError:
        return None
