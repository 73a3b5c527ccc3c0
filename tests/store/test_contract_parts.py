"""The console rows, transcripts, activity sums, accounts and API tokens: the same behaviour on every engine.

Each test runs on every store engine (:data:`tests.store.engines.ENGINES`; PostgreSQL on a fresh
database per test).  Every read-modify-write has a test that fires
many calls at once with ``asyncio.gather``: on PostgreSQL they run over pooled sessions, as two gateway
nodes would, and the outcome must be what one at a time gives.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from gateway.store import InboundState, ReplyState
from gateway.store.accounts import StoredAccount
from gateway.store.activity import ActivityRow
from gateway.store.console import ConsoleUser, Role
from gateway.store.tokens import MAX_TOKENS_PER_USER, ApiToken
from gateway.store.transcripts import Heard, Said
from tests.store.engines import ENGINES, open_store
from tests.store.rows import message, reply

MANY = 24


@pytest.fixture(params=ENGINES)
async def parts(request, tmp_path):
    store: Any = await open_store(request.param, tmp_path)
    yield store
    await store.close()


def user(name: str = "ada", role: Role = Role.ADMINISTRATOR, disabled: bool = False) -> ConsoleUser:
    teacher = None if role is Role.ADMINISTRATOR else f"relay:{name}"
    return ConsoleUser(name, name.title(), role, teacher, "argon2-hash-Zq81xW", time.time(), disabled)


def token(token_id: str, username: str = "ada", expires_at: float | None = None, at: float | None = None) -> ApiToken:
    return ApiToken(token_id, username, f"script {token_id}", at if at is not None else time.time(), None, expires_at)


# ------------------------------------------------------------------ console users and sessions


async def test_console_users_are_one_per_spelling_and_listed_in_order(parts):
    assert await parts.add_console_user(user("grace", Role.TEACHER))
    assert await parts.add_console_user(user("ada"))
    assert not await parts.add_console_user(user("ada", Role.TEACHER))
    assert await parts.console_user_count() == 2
    assert [u.username for u in await parts.console_users()] == ["ada", "grace"]
    found = await parts.console_user("  ADA ")
    assert found is not None and found.role is Role.ADMINISTRATOR and found.teacher is None and not found.disabled
    teacher = await parts.console_user("grace")
    assert teacher is not None and teacher.role is Role.TEACHER and teacher.teacher == "relay:grace"
    assert await parts.console_user("nobody") is None


async def test_concurrent_adds_of_one_username_make_one_user(parts):
    made = await asyncio.gather(*(parts.add_console_user(user("ada")) for _ in range(MANY)))
    assert made.count(True) == 1
    assert await parts.console_user_count() == 1


async def test_a_session_opens_for_its_ttl_for_an_enabled_user_and_ends(parts):
    await parts.add_console_user(user("ada"))
    await parts.add_console_user(user("off", disabled=True))
    await parts.open_session("Ada", "sess-id-Hk29xQp4", "csrf-Vb71", ttl_s=60)
    await parts.open_session("off", "sess-id-Lm03rT8e", "csrf-Qq02", ttl_s=60)
    await parts.open_session("ada", "sess-id-Zz55gone", "csrf-Ww03", ttl_s=-1)
    session = await parts.session("sess-id-Hk29xQp4")
    assert session is not None and session.user.username == "ada" and session.csrf == "csrf-Vb71"
    assert session.expires_at == pytest.approx(session.created_at + 60)
    assert await parts.session("sess-id-Lm03rT8e") is None  # a disabled user's session opens nothing
    assert await parts.session("sess-id-Zz55gone") is None  # expired
    assert await parts.session("sess-id-unknown") is None
    await parts.end_session("sess-id-Hk29xQp4")
    assert await parts.session("sess-id-Hk29xQp4") is None


async def test_prune_removes_expired_sessions_and_links_only(parts):
    await parts.add_console_user(user("ada"))
    await parts.open_session("ada", "sess-id-live-P9a", "c", ttl_s=600)
    await parts.open_session("ada", "sess-id-dead-R2b", "c", ttl_s=-1)
    assert await parts.prune() >= 1
    assert await parts.session("sess-id-live-P9a") is not None


# ------------------------------------------------------------------ the setup link


async def test_a_new_setup_link_voids_the_unused_one(parts):
    await parts.issue_setup_token("setup-Aa11Bb22", ttl_s=600)
    await parts.issue_setup_token("setup-Cc33Dd44", ttl_s=600)
    assert not await parts.setup_token_live("setup-Aa11Bb22")
    assert await parts.setup_token_live("setup-Cc33Dd44")
    await parts.issue_setup_token("setup-Ee55Ff66", ttl_s=-1)
    assert not await parts.setup_token_live("setup-Ee55Ff66")  # expired at once
    assert not await parts.setup_token_live("setup-Cc33Dd44")


async def test_redeeming_the_link_makes_the_first_user_once(parts):
    await parts.issue_setup_token("setup-Gg77Hh88", ttl_s=600)
    assert not await parts.redeem_setup_token("setup-wrong-Jj99", user("eve"))
    assert await parts.redeem_setup_token("setup-Gg77Hh88", user("ada"))
    assert not await parts.redeem_setup_token("setup-Gg77Hh88", user("eve"))
    assert [u.username for u in await parts.console_users()] == ["ada"]
    assert not await parts.setup_token_live("setup-Gg77Hh88")
    await parts.issue_setup_token("setup-Kk00Ll11", ttl_s=600)
    assert not await parts.setup_token_live("setup-Kk00Ll11")  # a user exists: no link opens anything
    assert not await parts.redeem_setup_token("setup-Kk00Ll11", user("eve"))


async def test_an_expired_link_redeems_nothing(parts):
    await parts.issue_setup_token("setup-Mm22Nn33", ttl_s=-1)
    assert not await parts.redeem_setup_token("setup-Mm22Nn33", user("ada"))
    assert await parts.console_user_count() == 0


async def test_concurrent_redeems_make_exactly_one_administrator(parts):
    await parts.issue_setup_token("setup-Oo44Pp55", ttl_s=600)
    made = await asyncio.gather(*(parts.redeem_setup_token("setup-Oo44Pp55", user(f"admin{i}")) for i in range(MANY)))
    assert made.count(True) == 1
    assert await parts.console_user_count() == 1


async def test_concurrent_issues_leave_exactly_one_live_link(parts):
    links = [f"setup-conc-{i}-Qr7" for i in range(MANY)]
    await asyncio.gather(*(parts.issue_setup_token(link, ttl_s=600) for link in links))
    live = [link for link in links if await parts.setup_token_live(link)]
    assert len(live) == 1


# ------------------------------------------------------------------ API tokens


async def test_a_token_acts_as_its_enabled_user_until_revoked(parts):
    await parts.add_console_user(user("ada"))
    assert await parts.add_api_token(token("t1", "Ada"), "api-secret-Ux83Lp0q")
    assert not await parts.add_api_token(token("t2", "nobody"), "api-secret-Yy19Tk2m")  # no such user
    found = await parts.api_token_user("api-secret-Ux83Lp0q")
    assert found is not None
    acting, listed = found
    assert acting.username == "ada" and listed.id == "t1" and listed.last_used_at is None
    again = await parts.api_token_user("api-secret-Ux83Lp0q")
    assert again is not None and again[1].last_used_at is not None  # the first use was noted
    assert await parts.api_token_user("api-secret-unknown-Qa1") is None
    assert not await parts.revoke_api_token("t1", "grace")  # not grace's
    assert await parts.revoke_api_token("t1", "ADA")
    assert not await parts.revoke_api_token("t1")
    assert await parts.api_token_user("api-secret-Ux83Lp0q") is None


async def test_tokens_list_live_ones_newest_first_and_per_user(parts):
    await parts.add_console_user(user("ada"))
    await parts.add_console_user(user("grace", Role.TEACHER))
    now = time.time()
    await parts.add_api_token(token("old", "ada", at=now - 10), "api-secret-old-Hq3")
    await parts.add_api_token(token("new", "ada", at=now), "api-secret-new-Jr4")
    await parts.add_api_token(token("gone", "ada", expires_at=now - 1, at=now - 5), "api-secret-gone-Ks5")
    await parts.add_api_token(token("hers", "grace", at=now - 3), "api-secret-hers-Lt6")
    assert [t.id for t in await parts.api_tokens()] == ["new", "hers", "old"]
    assert [t.id for t in await parts.api_tokens("Ada")] == ["new", "old"]
    assert await parts.api_token_user("api-secret-gone-Ks5") is None
    assert await parts.prune() >= 1


async def test_a_disabled_users_tokens_open_nothing(parts):
    await parts.add_console_user(user("off", disabled=True))
    assert await parts.add_api_token(token("t1", "off"), "api-secret-off-Mu7")
    assert await parts.api_token_user("api-secret-off-Mu7") is None


async def test_the_token_cap_holds_one_at_a_time_and_after_revoking(parts):
    await parts.add_console_user(user("ada"))
    for i in range(MAX_TOKENS_PER_USER):
        assert await parts.add_api_token(token(f"t{i}"), f"api-secret-cap-{i}-Nv8")
    assert not await parts.add_api_token(token("one-more"), "api-secret-more-Ow9")
    assert await parts.revoke_api_token("t0")
    assert await parts.add_api_token(token("one-more"), "api-secret-more-Ow9")
    assert len(await parts.api_tokens("ada")) == MAX_TOKENS_PER_USER


async def test_the_cap_frees_room_when_expired_tokens_are_pruned(parts):
    await parts.add_console_user(user("ada"))
    for i in range(MAX_TOKENS_PER_USER):
        assert await parts.add_api_token(token(f"t{i}", expires_at=time.time() - 1), f"api-secret-exp-{i}-Px0")
    assert not await parts.add_api_token(token("fresh"), "api-secret-fresh-Qy1")  # expired rows still count
    await parts.prune()
    assert await parts.add_api_token(token("fresh"), "api-secret-fresh-Qy1")


async def test_concurrent_adds_never_pass_the_token_cap(parts):
    users = [f"user{n}" for n in range(4)]
    for name in users:
        await parts.add_console_user(user(name, Role.TEACHER))
        for i in range(MAX_TOKENS_PER_USER - 3):
            await parts.add_api_token(token(f"{name}-t{i}", name), f"api-secret-pre-{name}-{i}-Rz2")
    made = await asyncio.gather(*(parts.add_api_token(token(f"{name}-c{i}", name), f"api-secret-conc-{name}-{i}-Sa3")
                                  for name in users for i in range(MANY)))
    assert made.count(True) == 3 * len(users)
    for name in users:
        assert len(await parts.api_tokens(name)) == MAX_TOKENS_PER_USER


async def test_concurrent_revokes_of_one_token_succeed_once(parts):
    await parts.add_console_user(user("ada"))
    await parts.add_api_token(token("t1"), "api-secret-rev-Tb4")
    revoked = await asyncio.gather(*(parts.revoke_api_token("t1") for _ in range(MANY)))
    assert revoked.count(True) == 1
    for i in range(MAX_TOKENS_PER_USER):  # the count fell by one, not by every call
        assert await parts.add_api_token(token(f"n{i}"), f"api-secret-after-{i}-Uc5")
    assert not await parts.add_api_token(token("over"), "api-secret-over-Vd6")


async def test_concurrent_uses_of_a_token_all_find_its_user(parts):
    await parts.add_console_user(user("ada"))
    await parts.add_api_token(token("t1"), "api-secret-use-We7")
    found = await asyncio.gather(*(parts.api_token_user("api-secret-use-We7") for _ in range(MANY)))
    assert all(f is not None and f[0].username == "ada" for f in found)
    listed = await parts.api_tokens("ada")
    assert listed[0].last_used_at is not None


# ------------------------------------------------------------------ switches and activity


async def test_a_disabled_account_stays_listed_until_enabled(parts):
    await parts.set_account_disabled("telegram", "main", "ada")
    await parts.set_account_disabled("relay", "a", "grace")
    await parts.set_account_disabled("telegram", "main", "grace")
    switches = await parts.disabled_accounts()
    assert [(s.channel, s.account, s.by) for s in switches] == [("relay", "a", "grace"), ("telegram", "main", "grace")]
    assert all(s.at == pytest.approx(time.time(), abs=60) for s in switches)
    await parts.set_account_disabled("telegram", "main", None)
    assert [(s.channel, s.account) for s in await parts.disabled_accounts()] == [("relay", "a")]


async def test_concurrent_switches_of_one_account_leave_one_row(parts):
    await asyncio.gather(*(parts.set_account_disabled("relay", "a", f"user{i}") for i in range(MANY)))
    assert len(await parts.disabled_accounts()) == 1


async def test_activity_sums_per_hour_and_key(parts):
    hour = int(time.time()) // 3600 * 3600
    await parts.add_activity([])
    await parts.add_activity([ActivityRow(hour, "p", "relay", "a", "in", "", 2.0),
                              ActivityRow(hour, "p", "relay", "a", "in", "", 1.5),
                              ActivityRow(hour, "p", "relay", "a", "latency", "0.5", 1.0),
                              ActivityRow(hour - 3600, "", "relay", "a", "drop", "paused", 4.0)])
    await parts.add_activity([ActivityRow(hour, "p", "relay", "a", "in", "", 1.0)])
    rows = await parts.activity_since(hour + 1800)  # the hour of ``since`` is included
    assert {(r.measure, r.label): r.value for r in rows} == {("in", ""): 4.5, ("latency", "0.5"): 1.0}
    assert all(isinstance(r.hour, int) and r.hour == hour for r in rows)
    older = await parts.activity_since(hour - 3600)
    assert [r.hour for r in older][0] == hour - 3600 and len(older) == 3


async def test_concurrent_activity_adds_sum_exactly(parts):
    hour = int(time.time()) // 3600 * 3600
    keys = [("in", ""), ("out", ""), ("drop", "paused"), ("error", "send")]

    def batch(i: int) -> list[ActivityRow]:
        order = keys[i % 4:] + keys[:i % 4]  # overlapping rows, each call in another order
        return [ActivityRow(hour, "p", "relay", "a", m, label, 1.0) for m, label in order]

    await asyncio.gather(*(parts.add_activity(batch(i)) for i in range(MANY)))
    rows = await parts.activity_since(hour)
    assert {(r.measure, r.label): r.value for r in rows} == {key: float(MANY) for key in keys}


# ------------------------------------------------------------------ console-made accounts


def account(name: str = "main", sealed: bytes = b"\x00sealed\xff-Xk2") -> StoredAccount:
    return StoredAccount("telegram", name, "algebra", sealed, "ada", 1_800_000_000.25)


async def test_stored_accounts_add_reseal_and_remove(parts):
    assert await parts.add_stored_account(account("main"))
    assert await parts.add_stored_account(account("alt"))
    assert not await parts.add_stored_account(account("main", b"other"))
    await parts.reseal_stored_account("telegram", "main", b"\x01resealed\x00-Ym3")
    stored = await parts.stored_accounts()
    assert [a.account for a in stored] == ["alt", "main"]
    assert stored[1].sealed == b"\x01resealed\x00-Ym3" and isinstance(stored[1].sealed, bytes)
    assert stored[1].created_at == 1_800_000_000.25  # a double, not a float4
    assert await parts.remove_stored_account("telegram", "main")
    assert not await parts.remove_stored_account("telegram", "main")
    assert [a.account for a in await parts.stored_accounts()] == ["alt"]


async def test_concurrent_adds_and_removes_of_one_account_succeed_once(parts):
    added = await asyncio.gather(*(parts.add_stored_account(account()) for _ in range(MANY)))
    assert added.count(True) == 1
    removed = await asyncio.gather(*(parts.remove_stored_account("telegram", "main") for _ in range(MANY)))
    assert removed.count(True) == 1


# ------------------------------------------------------------------ transcripts


async def test_conversations_newest_first_with_what_waits_there(parts):
    await parts.accept([message("1", "c1"), message("2", "c1")], retention_s=600)
    await asyncio.sleep(0.01)
    await parts.accept([message("3", "c2")], retention_s=600)
    await parts.mark_inbound([("relay", "a", "1")], InboundState.HELD)
    await parts.put_reply(reply("r1", "c1", markdown="answer r1"), ReplyState.DELIVERED)
    found = await parts.conversations(10)
    assert [c.key for c in found] == [message("3", "c2").address.conversation_key,
                                      message("1", "c1").address.conversation_key]
    c2, c1 = found
    assert c2.last_heard.message.event_id == "3" and c2.last_said is None and (c2.pending, c2.held) == (1, 0)
    assert c1.last_heard.message.event_id == "2" and c1.last_heard.state is InboundState.PENDING
    assert c1.last_said is not None and c1.last_said.reply.markdown == "answer r1"
    assert c1.last_said.state is ReplyState.DELIVERED and (c1.pending, c1.held) == (1, 1)
    assert [c.key for c in await parts.conversations(1)] == [c2.key]
    assert await parts.conversations(0) == []


async def test_a_conversation_of_only_echoes_is_not_listed_and_echoes_are_shown_once(parts):
    await parts.accept([message("e1", "c9", from_self=True)], retention_s=600)
    assert await parts.conversations(10) == []
    await parts.accept([message("1", "c1")], retention_s=600)
    await asyncio.sleep(0.01)
    await parts.put_reply(reply("r1", "c1", markdown="answer r1"), ReplyState.DELIVERED)
    await asyncio.sleep(0.01)
    await parts.accept([message("e2", "c1", from_self=True)], retention_s=600)
    key = message("1", "c1").address.conversation_key
    [activity] = await parts.conversations(10)
    assert activity.last_heard.message.event_id == "1"  # past the echo
    entries = await parts.transcript(key, 10)
    assert [type(e) for e in entries] == [Heard, Said]
    assert isinstance(entries[0], Heard) and entries[0].message.event_id == "1"


async def test_a_transcript_is_the_last_messages_and_replies_oldest_first(parts):
    for i in range(4):
        await parts.accept([message(f"m{i}", "c1")], retention_s=600)
        await asyncio.sleep(0.01)
        await parts.put_reply(reply(f"r{i}", "c1"), ReplyState.DELIVERED)
        await asyncio.sleep(0.01)
    await parts.accept([message("other", "c2")], retention_s=600)
    entries = await parts.transcript(message("m0", "c1").address.conversation_key, 2)
    described = [e.message.event_id if isinstance(e, Heard) else e.reply.idempotency_key for e in entries]
    assert described == ["m2", "r2", "m3", "r3"]
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert await parts.transcript("relay:a:nowhere", 5) == []
