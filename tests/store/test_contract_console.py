"""The console's rows, on every engine: users, sessions, the setup link, API tokens, console-made accounts."""

from __future__ import annotations

import time

from gateway.store.accounts import StoredAccount
from gateway.store.console import ConsoleUser, Role
from gateway.store.tokens import ApiToken

SECRET = "pgw-tok-9Rk2vQ7xLm4Tz8Yb"


def user(name: str = "ada", role: Role = Role.ADMINISTRATOR) -> ConsoleUser:
    return ConsoleUser(name, name.title(), role, None if role is Role.ADMINISTRATOR else "relay:t1",
                       "$argon2id$not-a-real-hash", time.time())


async def test_users_are_unique_by_name_and_listed(store):
    assert await store.console_user_count() == 0
    assert await store.add_console_user(user("ada"))
    assert not await store.add_console_user(user("ada", Role.TEACHER))
    assert await store.add_console_user(user("bob", Role.TEACHER))
    assert await store.console_user_count() == 2
    assert sorted(u.username for u in await store.console_users()) == ["ada", "bob"]
    found = await store.console_user("ada")
    assert found is not None and found.role is Role.ADMINISTRATOR
    assert await store.console_user("nobody") is None


async def test_a_session_lives_until_ended_or_expired(store):
    await store.add_console_user(user("ada"))
    await store.open_session("ada", "sess-live-4Qm8", "csrf-7Yx2", ttl_s=600)
    await store.open_session("ada", "sess-old-2Kp9", "csrf-1Ab3", ttl_s=-1)
    live = await store.session("sess-live-4Qm8")
    assert live is not None and live.user.username == "ada" and live.csrf == "csrf-7Yx2"
    assert await store.session("sess-old-2Kp9") is None
    assert await store.session("sess-unknown") is None
    await store.end_session("sess-live-4Qm8")
    assert await store.session("sess-live-4Qm8") is None


async def test_the_setup_link_makes_the_first_user_once(store):
    await store.issue_setup_token("setup-first-8Hq3", 600)
    await store.issue_setup_token("setup-second-5Wd1", 600)  # voids the first
    assert not await store.setup_token_live("setup-first-8Hq3")
    assert await store.setup_token_live("setup-second-5Wd1")
    assert await store.redeem_setup_token("setup-second-5Wd1", user("ada"))
    assert not await store.redeem_setup_token("setup-second-5Wd1", user("eve"))
    assert [u.username for u in await store.console_users()] == ["ada"]


async def test_an_api_token_opens_its_user_until_revoked_or_expired(store):
    await store.add_console_user(user("ada"))
    now = time.time()
    assert await store.add_api_token(ApiToken("t1", "ada", "script", now, None, None), SECRET)
    assert not await store.add_api_token(ApiToken("t2", "ghost", "script", now, None, None), SECRET + "x")
    assert await store.add_api_token(ApiToken("t3", "ada", "old", now, None, now - 1), SECRET + "old")
    opened = await store.api_token_user(SECRET)
    assert opened is not None and opened[0].username == "ada" and opened[1].id == "t1"
    assert await store.api_token_user(SECRET + "old") is None
    listed = await store.api_tokens("ada")
    assert [t.id for t in listed] == ["t1"] and listed[0].last_used_at is not None
    assert not await store.revoke_api_token("t1", "bob")
    assert await store.revoke_api_token("t1")
    assert await store.api_token_user(SECRET) is None and not await store.revoke_api_token("t1")


async def test_console_made_accounts_are_added_once_resealed_and_removed(store):
    row = StoredAccount("telegram", "kids", "tutor", b"sealed-1", "ada", time.time())
    assert await store.add_stored_account(row)
    assert not await store.add_stored_account(row)
    await store.reseal_stored_account("telegram", "kids", b"sealed-2")
    assert [(a.account, a.sealed) for a in await store.stored_accounts()] == [("kids", b"sealed-2")]
    assert await store.remove_stored_account("telegram", "kids")
    assert not await store.remove_stored_account("telegram", "kids")
    assert await store.stored_accounts() == []
