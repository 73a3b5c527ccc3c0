"""The first administrator from the one-time link ``serve`` prints (``partners console add-user``: tests/cli)."""

from __future__ import annotations

import asyncio
import re
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.console.passwords import hash_password
from gateway.console.setup import first_start_token, setup_link
from gateway.redaction import MASK, redact
from gateway.store.console import ConsoleUser, Role
from tests.cli.test_process import PARTNERS, clean_env, read_until
from tests.console.rig import client, hidden, serve_console, sign_in

NEW_PASSWORD = "first-admin-pw-jade-3318"


@pytest.fixture
async def empty(tmp_path: Path):
    async with serve_console(tmp_path / "data", with_users=False) as running:
        yield running


async def create_admin(http, link: str, password: str = NEW_PASSWORD, again: str | None = None, username: str = "Head"):
    page = await http.get(link)
    assert page.status_code == 200, page.text
    return await http.post("/console/setup", data={
        "csrf": hidden(page.text, "csrf"), "token": hidden(page.text, "token"), "username": username,
        "display_name": "Head Teacher", "password": password, "password_again": password if again is None else again})


async def test_the_link_makes_one_administrator_once(empty):
    token = await first_start_token(empty.gateway.store)
    assert token is not None and redact(f"link {token}") == f"link {MASK}"  # no log line can show it
    link = setup_link(empty.url, token)
    assert link == f"{empty.url}/console/setup?token={token}"
    async with aclosing(client(empty.url)) as http:
        made = await create_admin(http, link)
        assert made.status_code == 303 and made.headers["location"] == "/console/login?created=1"
        assert (await http.get(link)).status_code == 404  # used
        assert (await sign_in(http, "head", NEW_PASSWORD)).status_code == 303
        assert [p["id"] for p in (await http.get("/console/api/partners")).json()["partners"]] == ["algebra", "geometry", "biology"]
    [head] = await empty.gateway.store.console_users()
    assert (head.username, head.display_name, head.role, head.teacher) == ("head", "Head Teacher", Role.ADMINISTRATOR, None)
    assert head.password_hash.startswith("$argon2id$") and NEW_PASSWORD not in head.password_hash
    assert await first_start_token(empty.gateway.store) is None  # a console with a user prints no link


async def test_a_form_sent_twice_makes_one_administrator(empty):
    link = setup_link(empty.url, await first_start_token(empty.gateway.store) or "")
    async with aclosing(client(empty.url)) as first, aclosing(client(empty.url)) as second:
        pages = [await first.get(link), await second.get(link)]
        forms = [{"csrf": hidden(p.text, "csrf"), "token": hidden(p.text, "token"), "username": name, "display_name": "",
                  "password": NEW_PASSWORD, "password_again": NEW_PASSWORD} for p, name in zip(pages, ("one", "two"), strict=True)]
        answers = await asyncio.gather(first.post("/console/setup", data=forms[0]), second.post("/console/setup", data=forms[1]))
    assert sorted(a.status_code for a in answers) == [303, 404]
    assert len(await empty.gateway.store.console_users()) == 1


async def test_a_bad_form_says_why_and_keeps_the_link(empty):
    link = setup_link(empty.url, await first_start_token(empty.gateway.store) or "")
    async with aclosing(client(empty.url)) as http:
        short = await create_admin(http, link, password="short-pw")
        differ = await create_admin(http, link, again=NEW_PASSWORD + "x")
        badname = await create_admin(http, link, username="has space")
        assert (short.status_code, differ.status_code, badname.status_code) == (400, 400, 400)
        assert "10 to 1024 characters" in short.text and "not the same" in differ.text and "username is 1 to 64" in badname.text
        assert (await create_admin(http, link)).status_code == 303


async def test_an_expired_a_replaced_or_an_unneeded_link_does_nothing(empty):
    store = empty.gateway.store
    await store.issue_setup_token("expired-setup-token-0001", ttl_s=-1.0)
    async with aclosing(client(empty.url)) as http:
        assert (await http.get("/console/setup?token=expired-setup-token-0001")).status_code == 404
        old = await first_start_token(store)
        new = await first_start_token(store)  # a restart prints a new link; the old one dies
        assert (await http.get(setup_link(empty.url, old or ""))).status_code == 404
        live = await http.get(setup_link(empty.url, new or ""))
        assert live.status_code == 200
        await store.add_console_user(ConsoleUser("cli-admin", "CLI", Role.ADMINISTRATOR, None, hash_password(NEW_PASSWORD),
                                                 time.time()))
        assert (await http.get(setup_link(empty.url, new or ""))).status_code == 404  # someone made one from the CLI
        assert (await http.post("/console/setup", data={"csrf": hidden(live.text, "csrf"), "token": new or "",
                                                        "username": "late", "password": NEW_PASSWORD,
                                                        "password_again": NEW_PASSWORD})).status_code == 404
        assert (await http.get("/console/setup")).status_code == 404


# --------------------------------------------------------------------------- serve


@pytest.mark.slow
async def test_serve_prints_the_link_once_and_logs_no_token(tmp_path: Path):
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(PARTNERS, "serve", "--port", "0", "--log-level", "debug", cwd=tmp_path,
                                                    env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=log)
        try:
            seen = await read_until(proc.stdout, r"/console/setup\?token=")
            link = re.search(r"(http://127\.0\.0\.1:\d+/console/setup\?token=\S+)", seen).group(1)
            token = link.split("token=", 1)[1]
            base = link.split("/console/", 1)[0]
            async with aclosing(client(base)) as http:
                assert (await create_admin(http, link)).status_code == 303
                assert (await http.get(link)).status_code == 404
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 60)
    assert seen.count("/console/setup?token=") == 1
    assert token not in log_path.read_text(encoding="utf-8")
