"""Every console route, walked as the administrator, as teacher Ada, as teacher Ben and as strangers.

Strangers are a browser with no cookie, one with a forged cookie, one whose session expired, and
one whose user was disabled after signing in.  What each gets is the table in
``gateway/console/pages.py``: pages send strangers to sign in (303), the API answers them 401; a
partner that is not yours is 404, like one that does not exist; the users list is 403 to a teacher.
"""

from __future__ import annotations

import re
import secrets
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest

from gateway.console.pages import Console
from gateway.console.signin import SESSION_COOKIE
from gateway.store.console import Role
from tests.console.rig import ALL_PARTNERS, SEEN, client, serve_console, signed_in, user

TEACHERS_AND_ADMIN = ("root", "ada", "ben")
AREA_PAGES = ("/console/conversations", "/console/pairing")
AREA_API = ("/console/api/conversations", "/console/api/pairing")
UNKNOWN_REF = "dGVsZWdyYW06bWFpbjo0MDQ"  # a conversation key no one has written in
NOT_THERE = (f"/console/conversations/{UNKNOWN_REF}", f"/console/api/conversations/{UNKNOWN_REF}")
STRANGERS = ("no cookie", "forged cookie", "expired session", "disabled user")
TOKEN_PATHS = ("/console/tokens", "/console/api/tokens")
TOKEN_WALK = [("GET", "/console/tokens"), ("POST", "/console/tokens"), ("POST", "/console/tokens/0123456789abcdef/revoke"),
              ("GET", "/console/api/tokens"), ("POST", "/console/api/tokens"), ("DELETE", "/console/api/tokens/0123456789abcdef"),
              ("GET", "/console/api/openapi.json")]


def expected(viewer: str, method: str, path: str) -> int:
    """The status a viewer gets; the one statement of who may do what that this test holds the app to."""
    stranger = viewer in STRANGERS
    if path.startswith(TOKEN_PATHS):  # API tokens (gateway.console.tokens)
        if stranger:
            return 401 if path.startswith("/console/api/") else 303
        return 200 if method == "GET" else 403  # the walk sends no CSRF token
    if PARTNERS_AREA.match(path) and not (method == "GET" and re.fullmatch(r"/console/api/partners(/[^/]+)?", path)):
        return _partners_and_personas(viewer, method, path)
    if path.startswith(AREA_PAGES) or path.startswith(AREA_API):  # conversations and pairing
        if stranger:
            return 303 if path.startswith(AREA_PAGES) else 401
        if method == "POST":
            return 403  # the walk sends no CSRF token
        return 404 if path.startswith(NOT_THERE) else 200
    if path.startswith("/console/static/"):
        return 200
    if "/learners" in path or "/knowledge" in path:
        return _learners_and_knowledge(viewer, method, path)
    if path == "/console":
        return 303
    if path.startswith("/console/setup"):
        return 404  # no live token in this walk
    if path == "/console/login":
        return 200 if stranger else 303
    if path == "/console/logout":
        return 303 if stranger else 403  # a session's sign-out needs its CSRF token
    if path == "/console/":
        return 303 if stranger else 200
    if path in ("/console/channels", "/console/dashboard", "/console/dashboard?span=week"):
        return 303 if stranger else 200
    if method == "POST" and path.startswith("/console/channels/"):
        return 303 if stranger else 403  # no CSRF token in the walk
    if method == "POST" and path.startswith("/console/api/channels/"):
        return 401 if stranger else 403
    if path.startswith(("/console/channel-accounts", "/console/api/channel-accounts")):
        return _channel_accounts(viewer, method, path)
    if stranger:
        return 401  # the API
    if path == "/console/api/users":
        return 200 if viewer == "root" else 403
    if path.startswith("/console/api/partners/"):
        return 200 if path.rsplit("/", 1)[1] in SEEN[viewer] else 404
    return 200


def _channel_accounts(viewer: str, method: str, path: str) -> int:
    """Adding and deleting channel accounts (gateway.console.accounts): every signed-in viewer reaches the forms;
    writes need the CSRF token the walk does not send; a channel without a guided form is not there."""
    api = path.startswith("/console/api/")
    if viewer in STRANGERS:
        return 401 if api else 303
    if method != "GET":
        return 403
    return 404 if path.endswith(("/console", "/webchat", "/secrets")) else 200  # no guide; no console-made account in this walk


def _learners_and_knowledge(viewer: str, method: str, path: str) -> int:
    """The Learners and Knowledge areas in this walk's gateway, which runs a plugged-in responder (no brain memory)."""
    api = path.startswith("/console/api/")
    if viewer in STRANGERS:
        return 401 if api else 303
    if method not in ("GET", "HEAD"):
        return 403  # the walk sends no CSRF token
    partner = path.split("/")[4 if api else 3]
    return 503 if partner in SEEN[viewer] else 404  # no memory or knowledge to show; not theirs is not there


PARTNERS_AREA = re.compile(r"^/console/(new-partner|(api/)?personas/[^/]+|api/partners|"
                           r"(api/)?partners/[^/]+(/(delete|test-model|chat|settings|bindings|bindings/remove))?)$")
PERSONA_USERS = {"study-buddy": {"root", "ada", "ben"}, "socratic-math": {"root"}}
"""Who sees each persona in this walk: every partner of the walk speaks with study-buddy; none with socratic-math."""


def _partners_and_personas(viewer: str, method: str, path: str) -> int:
    """The Partners area and the persona editor (gateway.console.partners, .personas), in a gateway with no config file."""
    api = path.startswith("/console/api/")
    if viewer in STRANGERS:
        return 401 if api else 303
    if method not in ("GET", "HEAD"):
        return 403  # the walk sends no CSRF token
    if path == "/console/new-partner":
        return 200
    name = path.split("/")[4 if api else 3]
    if "/personas/" in path:
        return 200 if viewer in PERSONA_USERS.get(name, set()) else 404
    return 200 if name in SEEN[viewer] else 404


PARTNERS_WALK = [
    ("GET", "/console/new-partner"), ("POST", "/console/new-partner"), ("POST", "/console/api/partners"),
    *[(method, path.format(p=partner)) for partner in (*ALL_PARTNERS, "no-such-partner") for method, path in (
        ("GET", "/console/partners/{p}"), ("POST", "/console/partners/{p}"),
        ("GET", "/console/partners/{p}/delete"), ("POST", "/console/partners/{p}/delete"),
        ("POST", "/console/partners/{p}/test-model"), ("POST", "/console/partners/{p}/chat"),
        ("PUT", "/console/api/partners/{p}"), ("DELETE", "/console/api/partners/{p}"),
        ("GET", "/console/api/partners/{p}/settings"), ("POST", "/console/api/partners/{p}/test-model"),
        ("POST", "/console/api/partners/{p}/chat"),
        ("GET", "/console/partners/{p}/bindings"), ("POST", "/console/partners/{p}/bindings"),
        ("POST", "/console/partners/{p}/bindings/remove"), ("GET", "/console/api/partners/{p}/bindings"),
        ("POST", "/console/api/partners/{p}/bindings"), ("POST", "/console/api/partners/{p}/bindings/remove"))],
    *[(method, f"{prefix}/{persona}") for persona in ("study-buddy", "socratic-math", "no-such-persona")
      for prefix, methods in (("/console/personas", ("GET", "POST")), ("/console/api/personas", ("GET", "PUT")))
      for method in methods],
]

AREA_PATHS = ("/console/partners/{p}/learners", "/console/partners/{p}/learners/{person}",
              "/console/partners/{p}/learners/{person}/export", "/console/partners/{p}/learners/{person}/forget",
              "/console/api/partners/{p}/learners", "/console/api/partners/{p}/learners/{person}",
              "/console/partners/{p}/knowledge", "/console/partners/{p}/knowledge/{doc}",
              "/console/api/partners/{p}/knowledge", "/console/api/partners/{p}/knowledge/search",
              "/console/api/partners/{p}/knowledge/{doc}")
AREA_WRITES = (("POST", "/console/partners/{p}/learners/{person}/notes"), ("POST", "/console/partners/{p}/learners/{person}/forget"),
               ("PUT", "/console/api/partners/{p}/learners/{person}"), ("DELETE", "/console/api/partners/{p}/learners/{person}"),
               ("POST", "/console/partners/{p}/knowledge"), ("POST", "/console/partners/{p}/knowledge/{doc}/delete"),
               ("POST", "/console/api/partners/{p}/knowledge"), ("DELETE", "/console/api/partners/{p}/knowledge/{doc}"))
AREA_WALK = [(method, path.format(p=partner, person="0123456789abcdef", doc="notes.md"))
             for partner in (*ALL_PARTNERS, "no-such-partner")
             for method, path in (*(("GET", path) for path in AREA_PATHS), *AREA_WRITES)]

WALK = [
    ("GET", "/console"),
    ("GET", "/console/"),
    ("GET", "/console/login"),
    ("POST", "/console/logout"),
    ("GET", "/console/setup?token=not-a-live-token"),
    ("GET", "/console/api/partners"),
    *[("GET", f"/console/api/partners/{partner}") for partner in (*ALL_PARTNERS, "no-such-partner")],
    ("GET", "/console/api/users"),
    ("GET", "/console/static/console.css"),
    *[(method, f"{prefix}{path}") for prefix in ("/console", "/console/api") for method, path in (
        ("GET", "/conversations"), ("GET", f"/conversations/{UNKNOWN_REF}"),
        *[("POST", f"/conversations/{UNKNOWN_REF}/{action}") for action in ("takeover", "reply", "handback")],
        ("GET", "/pairing"), ("POST", "/pairing/ABCD2345/approve"), ("POST", "/pairing/ABCD2345/deny"))],
    ("GET", "/console/channels"),
    ("GET", "/console/api/channels"),
    ("POST", "/console/channels/webchat/default/disable"),
    ("POST", "/console/api/channels/webchat/default/restart"),
    ("GET", "/console/dashboard"),
    ("GET", "/console/dashboard?span=week"),
    ("GET", "/console/api/dashboard"),
    ("GET", "/console/channel-accounts/new"),
    *[("GET", f"/console/channel-accounts/new/{channel}") for channel in ("telegram", "slack", "weixin", "console")],
    *[("GET", f"/console/channel-accounts/new/{guide}")
      for guide in ("discord", "matrix", "email", "weixin-official-account", "wecom", "wecom-app", "webchat")],
    ("POST", "/console/channel-accounts/new/telegram"),
    ("POST", "/console/channel-accounts/telegram/main/delete"),
    ("POST", "/console/api/channel-accounts/telegram"),
    ("DELETE", "/console/api/channel-accounts/telegram/main"),
    ("GET", "/console/channel-accounts/telegram/main/secrets"),
    ("POST", "/console/channel-accounts/telegram/main/secrets"),
    ("PUT", "/console/api/channel-accounts/telegram/main/secrets"),
    *AREA_WALK,
    *TOKEN_WALK,
    *PARTNERS_WALK,
]


def test_the_walk_covers_every_console_route(tmp_path: Path):
    from tests.console.rig import console_config

    app_paths = set()
    for route in Console(console_config(tmp_path), store=None).routes():  # type: ignore[arg-type]
        if hasattr(route, "routes"):
            app_paths |= {f"{route.path}{child.path}" for child in route.routes}
        else:
            app_paths.add(route.path)
    walked = {path.split("?")[0] for _, path in WALK}
    walked |= {"/console/api/partners/{partner}", "/console/static", "/console/login", "/console/setup"}
    walked |= {path.replace(UNKNOWN_REF, "{ref}").replace("ABCD2345", "{code}") for path in walked}
    walked |= {"/console/channels/{channel}/{account}/{do}", "/console/api/channels/{channel}/{account}/{do}"}
    walked |= {"/console/channel-accounts/new/{channel}", "/console/channel-accounts/{channel}/{account}/delete",
               "/console/api/channel-accounts/{channel}", "/console/api/channel-accounts/{channel}/{account}",
               "/console/channel-accounts/{channel}/{account}/secrets",
               "/console/api/channel-accounts/{channel}/{account}/secrets"}
    walked |= {path.replace("{p}", "{partner}") for _, path in (*(("GET", p) for p in AREA_PATHS), *AREA_WRITES)}
    walked |= {path.replace("0123456789abcdef", "{token}") for _, path in TOKEN_WALK}
    walked |= {re.sub(r"/partners/[^/]+", "/partners/{partner}", re.sub(r"/personas/[^/]+", "/personas/{persona}", path))
               for _, path in PARTNERS_WALK}
    assert app_paths <= walked, app_paths - walked


async def viewer_client(served, viewer: str) -> httpx.AsyncClient:
    if viewer in TEACHERS_AND_ADMIN:
        return await signed_in(served.url, viewer)
    store = served.gateway.store
    if viewer == "no cookie":
        return client(served.url)
    if viewer == "forged cookie":
        return client(served.url, cookies={SESSION_COOKIE: secrets.token_urlsafe(32)})
    session = secrets.token_urlsafe(32)
    if viewer == "expired session":
        await store.open_session("ada", session, secrets.token_urlsafe(32), ttl_s=-1.0)
    else:  # a session opened while the user was enabled; the user is then disabled
        assert await store.add_console_user(user("gone", Role.TEACHER, "telegram:100", disabled=True)) is False
        await store.open_session("gone", session, secrets.token_urlsafe(32), ttl_s=3600.0)
    return client(served.url, cookies={SESSION_COOKIE: session})


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data") as running:
        yield running


@pytest.mark.parametrize("viewer", [*TEACHERS_AND_ADMIN, *STRANGERS])
async def test_each_viewer_gets_what_the_table_says(served, viewer: str):
    async with aclosing(await viewer_client(served, viewer)) as http:
        for method, path in WALK:
            response = await http.request(method, path)
            assert response.status_code == expected(viewer, method, path), (viewer, method, path, response.text[:200])
            if response.status_code == 303 and path in ("/console/", "/console/logout"):
                assert response.headers["location"].startswith("/console/login")
            if viewer in ("forged cookie", "expired session", "disabled user") and path == "/console/":
                assert f'{SESSION_COOKIE}=""' in response.headers["set-cookie"]  # a dead cookie is cleared
        if viewer in TEACHERS_AND_ADMIN:
            listed = (await http.get("/console/api/partners")).json()["partners"]
            assert [p["id"] for p in listed] == SEEN[viewer]
            page = (await http.get("/console/")).text
            for partner in ALL_PARTNERS:
                assert (f'data-partner="{partner}"' in page) == (partner in SEEN[viewer]), (viewer, partner)


async def test_a_teacher_is_refused_a_partner_of_theirs_under_no_other_id(served):
    async with aclosing(await signed_in(served.url, "ben")) as ben:
        assert (await ben.get("/console/api/partners/biology")).json() == {
            "id": "biology", "name": "Biology", "persona": "study-buddy", "owners": ["matrix:@ben:school.example"]}
        for probe in ("algebra", "ALGEBRA", "algebra%20", "..%2Falgebra", "geometry"):
            assert (await ben.get(f"/console/api/partners/{probe}")).status_code == 404, probe


async def test_the_users_list_shows_no_password_hash(served):
    async with aclosing(await signed_in(served.url, "root")) as root:
        users = (await root.get("/console/api/users")).json()["users"]
    assert [u["username"] for u in users] == ["ada", "ben", "gone", "root"]
    assert {u["role"] for u in users} == {"administrator", "teacher"}
    assert not any("argon2" in str(value) for u in users for value in u.values())


@pytest.mark.parametrize("viewer", TEACHERS_AND_ADMIN)
async def test_a_token_gets_what_its_users_session_gets_on_every_api_read(served, viewer: str):
    """An API token acts as its console user (ADR 0041): every JSON read of the walk answers it as the session."""
    from tests.console.test_tokens import made_token

    token = await made_token(served, viewer)
    reads = [path for method, path in WALK if method == "GET" and path.startswith("/console/api/")]
    assert len(reads) > 20
    async with client(served.url, headers={"Authorization": f"Bearer {token}"}) as http:
        for path in reads:
            response = await http.get(path)
            assert response.status_code == expected(viewer, "GET", path), (viewer, path, response.text[:200])
