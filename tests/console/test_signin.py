"""Signing in and out over real HTTP: the cookie, one answer for every wrong guess, the rate limit, CSRF, languages."""

from __future__ import annotations

import asyncio
import re
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.console import signin
from gateway.console.signin import MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_USER, SESSION_COOKIE, FailureWindow
from tests.console.rig import PASSWORDS, client, csrf_of, hidden, serve_console, sign_in, signed_in


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data") as running:
        yield running


def error_of(html: str) -> str:
    start = html.index('<p class="error"')
    return html[start:html.index("</p>", start)]


async def test_signing_in_sets_an_httponly_lax_session_cookie_for_the_console_only(served):
    async with aclosing(client(served.url)) as http:
        response = await sign_in(http, "ada")
    assert response.status_code == 303 and response.headers["location"] == "/console/"
    cookie = next(c for c in response.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}="))
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age"} <= attributes and "secure" not in attributes
    assert "SameSite=lax" in cookie and "Path=/console" in cookie


async def test_the_cookie_is_secure_behind_a_proxy_that_says_https(served):
    # uvicorn trusts X-Forwarded-Proto from loopback (its FORWARDED_ALLOW_IPS default): this is the proxy
    async with aclosing(client(served.url, headers={"X-Forwarded-Proto": "https"})) as http:
        assert "Secure" in await secure_session_cookie(http, "ada")


async def secure_session_cookie(http, username: str) -> str:
    """Sign in where every cookie is Secure: httpx keeps those off a plain-http loopback, so they go by hand."""
    page = await http.get("/console/login")
    assert "Secure" in page.headers["set-cookie"]  # the form's cookie too
    response = await http.post("/console/login", headers={"Cookie": page.headers["set-cookie"].split(";")[0]}, data={
        "csrf": hidden(page.text, "csrf"), "username": username, "password": PASSWORDS[username]})
    assert response.status_code == 303, response.text
    return next(c for c in response.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}="))


async def test_a_public_https_url_makes_the_cookie_secure(tmp_path: Path):
    async with serve_console(tmp_path / "data", public_url="https://console.school.example") as running, \
            aclosing(client(running.url)) as http:
        assert "Secure" in await secure_session_cookie(http, "ben")


async def test_unknown_user_wrong_password_and_disabled_user_get_the_same_answer(served):
    answers = []
    async with aclosing(client(served.url)) as http:
        for username, password in (("nobody", "whatever-pw-00x1"), ("ada", "not-adas-pw-00x2"), ("gone", PASSWORDS["gone"]),
                                   ("", "")):
            response = await sign_in(http, username, password)
            answers.append((response.status_code, error_of(response.text)))
            assert SESSION_COOKIE not in response.cookies
    assert len(set(answers)) == 1 and answers[0][0] == 401, answers


async def test_usernames_are_not_case_sensitive(served):
    async with aclosing(client(served.url)) as http:
        assert (await sign_in(http, "  ADA ", PASSWORDS["ada"])).status_code == 303


async def test_too_many_failures_for_one_username_hold_it_even_with_the_right_password(served):
    async with aclosing(client(served.url)) as http:
        for _ in range(MAX_FAILURES_PER_USER):
            assert (await sign_in(http, "ada", "a-wrong-pw-77zz")).status_code == 401
        held = await sign_in(http, "ada")
        assert held.status_code == 429 and int(held.headers["retry-after"]) > 0
        assert "15" in error_of(held.text)  # "try again in 15 minutes"
        assert (await sign_in(http, "ben")).status_code == 303  # another teacher is not held


async def test_too_many_failures_from_one_address_hold_every_username(served):
    async with aclosing(client(served.url)) as http:
        for i in range(MAX_FAILURES_PER_ADDRESS):
            assert (await sign_in(http, f"guess{i}", "a-wrong-pw-88yy")).status_code == 401
        assert (await sign_in(http, "root")).status_code == 429


def test_the_failure_window_slides(monkeypatch: pytest.MonkeyPatch):
    now = [1000.0]
    monkeypatch.setattr(signin.time, "monotonic", lambda: now[0])
    window = FailureWindow(limit=2, window_s=60.0)
    window.failed("ada")
    now[0] += 30
    window.failed("ada")
    assert window.wait_s("ada") == 30  # the first failure leaves the window in 30 s
    now[0] += 31
    assert window.wait_s("ada") == 0
    window.failed("ada")
    assert window.wait_s("ada") == 29
    window.clear("ada")
    assert window.wait_s("ada") == 0


async def test_the_sign_in_form_needs_its_own_token(served):
    async with aclosing(client(served.url)) as http:
        await http.get("/console/login")
        missing = await http.post("/console/login", data={"username": "ada", "password": PASSWORDS["ada"]})
        forged = await http.post("/console/login", data={"csrf": "x" * 43, "username": "ada", "password": PASSWORDS["ada"]})
    assert missing.status_code == forged.status_code == 403
    assert SESSION_COOKIE not in missing.cookies and SESSION_COOKIE not in forged.cookies


async def test_a_sign_in_posted_from_another_site_is_refused(served):
    async with aclosing(client(served.url)) as http:
        page = await http.get("/console/login")
        response = await http.post("/console/login", headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
                                   data={"csrf": hidden(page.text, "csrf"), "username": "ada", "password": PASSWORDS["ada"]})
    assert response.status_code == 403


async def test_signing_out_needs_the_session_token_and_ends_the_session_for_every_copy_of_the_cookie(served):
    async with aclosing(await signed_in(served.url, "ada")) as http:
        token = await csrf_of(http)
        cookie = http.cookies[SESSION_COOKIE]
        assert (await http.post("/console/logout", data={"csrf": "x" * 43})).status_code == 403
        assert (await http.post("/console/logout")).status_code == 403
        assert (await http.get("/console/api/partners")).status_code == 200  # still signed in
        out = await http.post("/console/logout", headers={"X-CSRF-Token": token})
        assert out.status_code == 303 and out.headers["location"] == "/console/login?signed_out=1"
    async with aclosing(client(served.url, cookies={SESSION_COOKIE: cookie})) as copy:
        assert (await copy.get("/console/api/partners")).status_code == 401


async def test_each_session_has_its_own_csrf_token(served):
    async with aclosing(await signed_in(served.url, "ada")) as first, aclosing(await signed_in(served.url, "ada")) as second:
        theirs = await csrf_of(second)
        assert theirs != await csrf_of(first)
        assert (await first.post("/console/logout", data={"csrf": theirs})).status_code == 403
        assert (await first.post("/console/logout", data={"csrf": await csrf_of(first)})).status_code == 303
        assert (await second.get("/console/api/partners")).status_code == 200  # signing out one leaves the other


async def test_pages_speak_the_browsers_language(served):
    async with aclosing(client(served.url)) as http:
        chinese = await http.get("/console/login", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
        english = await http.get("/console/login", headers={"Accept-Language": "fr-FR,zh;q=0.5"})
    assert chinese.headers["content-language"] == "zh-Hans" and '<html lang="zh-Hans">' in chinese.text
    assert "登录" in chinese.text and "Sign in" not in chinese.text
    assert english.headers["content-language"] == "en" and "Sign in" in english.text
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        page = await ada.get("/console/", headers={"Accept-Language": "zh-Hans"})
    assert "学伴" in page.text and "telegram:100" in page.text


async def test_pages_allow_no_script_and_are_not_cached(served):
    async with aclosing(client(served.url)) as http:
        page = await http.get("/console/login")
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "same-origin"


async def test_sign_ins_run_side_by_side(served):
    """Password checks run in worker threads: a burst of sign-ins all succeed."""
    async def one(username: str) -> int:
        async with aclosing(client(served.url)) as http:
            return (await sign_in(http, username)).status_code

    assert await asyncio.gather(*(one(name) for name in ("root", "ada", "ben") * 2)) == [303] * 6


@pytest.mark.parametrize(("page", "current"), [
    ("/console/", "/console/"),
    ("/console/conversations", "/console/conversations"), ("/console/pairing", "/console/pairing"),
    ("/console/channels", "/console/channels"), ("/console/channel-accounts/new", "/console/channels"),
    ("/console/dashboard", "/console/dashboard"), ("/console/tokens", "/console/tokens"),
])
async def test_every_page_leads_to_every_area_and_marks_the_one_it_is_in(served, page: str, current: str):
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        html = (await ada.get(page)).text
    nav = html.split('<nav class="area"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'<a href="([^"]+)"', nav)
    assert links == ["/console/", "/console/conversations", "/console/pairing", "/console/channels", "/console/dashboard",
                     "/console/tokens"]
    assert re.findall(r'<a href="([^"]+)" aria-current="page"', nav) == [current]
