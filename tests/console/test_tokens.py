"""API tokens over real HTTP: made once, acting as their user on the console API and /api/v1, revoked, expired.

Ada (teacher of algebra and geometry), Ben (biology) and root (administrator) are the console rig's
users; every request goes to uvicorn on loopback.
"""

from __future__ import annotations

import logging
import time
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.console.tokens import PREFIX, new_token
from gateway.store.tokens import ApiToken
from tests.console.rig import Served, client, csrf_of, serve_console, signed_in

PAIRING = "/console/api/pairing/ABCD2345/approve"
MEMORY = "/api/v1/partners/{partner}/learners/telegram:main:555/memory"


async def made_token(served: Served, username: str, name: str = "nightly-report", **extra: object) -> str:
    """A token of ``username``'s, made as a browser would: signed in, with the session's CSRF token."""
    async with aclosing(await signed_in(served.url, username)) as http:
        response = await http.post("/console/api/tokens", json={"name": name, **extra},
                                   headers={"X-CSRF-Token": await csrf_of(http)})
    assert response.status_code == 201, response.text
    return response.json()["token"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data") as running:
        yield running


async def test_a_token_is_shown_once_and_kept_only_as_its_digest(served, tmp_path: Path):
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        made = await ada.post("/console/api/tokens", json={"name": "grades-sync", "expires_in_days": 30},
                              headers={"X-CSRF-Token": await csrf_of(ada)})
        assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
        secret, summary = made.json()["token"], made.json()["summary"]
        assert secret.startswith(PREFIX) and len(secret) > 40
        assert summary["name"] == "grades-sync" and summary["username"] == "ada" and summary["last_used_at"] is None
        assert 29 * 86400 < summary["expires_at"] - time.time() <= 30 * 86400
        listed = (await ada.get("/console/api/tokens")).json()["tokens"]
        page = (await ada.get("/console/tokens")).text
    assert [t["id"] for t in listed] == [summary["id"]] and secret not in str(listed)
    assert f'data-token="{summary["id"]}"' in page and secret not in page
    kept = b"".join(path.read_bytes() for path in (tmp_path / "data").glob("gateway.db*"))
    assert secret.encode() not in kept  # only its digest is stored


async def test_a_token_acts_as_its_user_and_sees_only_their_partners(served):
    ada, root = await made_token(served, "ada"), await made_token(served, "root")
    async with client(served.url) as http:
        listed = (await http.get("/console/api/partners", headers=bearer(ada))).json()["partners"]
        assert [p["id"] for p in listed] == ["algebra", "geometry"]
        assert (await http.get("/console/api/partners/algebra", headers=bearer(ada))).status_code == 200
        assert (await http.get("/console/api/partners/biology", headers=bearer(ada))).status_code == 404  # Ben's: not there
        assert (await http.get("/console/api/users", headers=bearer(ada))).status_code == 403
        assert (await http.get("/console/api/users", headers=bearer(root))).status_code == 200
        assert (await http.get("/console/api/partners/biology", headers=bearer(root))).status_code == 200
        tokens = (await http.get("/console/api/tokens", headers=bearer(ada))).json()["tokens"]
        assert {t["username"] for t in tokens} == {"ada"}  # a teacher lists their own; root lists everyone's
        assert {t["username"] for t in (await http.get("/console/api/tokens", headers=bearer(root))).json()["tokens"]} == {"ada", "root"}
        assert tokens[0]["last_used_at"] is not None  # its use is noted


async def test_a_bearer_request_needs_no_csrf_and_never_falls_back_to_the_cookie(served):
    token = await made_token(served, "ada")
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        # A write by token reaches the route (no code waiting: 404), where the session without CSRF is refused (403).
        assert (await ada.post(PAIRING)).status_code == 403
        assert (await ada.post(PAIRING, headers=bearer(token))).status_code == 404
        # A signed-in browser that also sends a header that opens nothing is a stranger: the header decides.
        wrong = await ada.get("/console/api/partners", headers=bearer(PREFIX + "x" * 43))
        assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
        assert (await ada.get("/console/api/partners", headers={"Authorization": "Basic YWRhOnB3"})).status_code == 401
        # Pages are for browsers: a token does not open one.
        assert (await client(served.url).get("/console/", headers=bearer(token))).status_code == 303


async def test_a_token_cannot_make_a_token(served):
    token = await made_token(served, "root")
    async with client(served.url) as http:
        refused = await http.post("/console/api/tokens", json={"name": "successor"}, headers=bearer(token))
        assert refused.status_code == 403 and "cannot make tokens" in refused.json()["error"]
        assert len((await http.get("/console/api/tokens", headers=bearer(token))).json()["tokens"]) == 1


async def test_a_revoked_token_opens_nothing(served):
    ada_token, ben_token = await made_token(served, "ada"), await made_token(served, "ben")
    async with client(served.url) as http:
        everyone = await http.get("/console/api/tokens", headers=bearer(await made_token(served, "root")))
        ids = {t["username"]: t["id"] for t in everyone.json()["tokens"]}
        assert (await http.delete(f"/console/api/tokens/{ids['ben']}", headers=bearer(ada_token))).status_code == 404  # not hers
        assert (await http.get("/console/api/partners", headers=bearer(ben_token))).status_code == 200
        revoked = await http.delete(f"/console/api/tokens/{ids['ada']}", headers=bearer(ada_token))  # a leaked token revokes itself
        assert revoked.status_code == 200 and revoked.json() == {"revoked": ids["ada"]}
        after = await http.get("/console/api/partners", headers=bearer(ada_token))
        assert after.status_code == 401 and after.headers["www-authenticate"].startswith("Bearer")
        assert (await http.get(MEMORY.format(partner="algebra"), headers=bearer(ada_token))).status_code == 401
        assert (await http.delete(f"/console/api/tokens/{ids['ada']}", headers=bearer(ben_token))).status_code == 404  # gone


async def test_revoking_in_the_page(served):
    token = await made_token(served, "ada", name="old-laptop")
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        [listed] = (await ada.get("/console/api/tokens")).json()["tokens"]
        csrf = await csrf_of(ada)
        gone = await ada.post(f"/console/tokens/{listed['id']}/revoke", data={"csrf": csrf})
        assert gone.status_code == 303 and gone.headers["location"] == "/console/tokens?revoked=1"
        assert (await ada.post(f"/console/tokens/{listed['id']}/revoke", data={"csrf": csrf})).status_code == 404
    async with client(served.url) as http:
        assert (await http.get("/console/api/partners", headers=bearer(token))).status_code == 401


async def test_making_a_token_in_the_page_shows_it_once(served):
    async with aclosing(await signed_in(served.url, "ben")) as ben:
        csrf = await csrf_of(ben)
        made = await ben.post("/console/tokens", data={"csrf": csrf, "name": "lab-scripts", "expires_in_days": ""})
        assert made.status_code == 200
        secret = made.text.split('<code id="token-secret">')[1].split("</code>")[0]
        assert secret.startswith(PREFIX)
        assert secret not in (await ben.get("/console/tokens")).text
        bad = await ben.post("/console/tokens", data={"csrf": csrf, "name": "", "expires_in_days": "99999"})
        assert bad.status_code == 400 and 'role="alert"' in bad.text
    async with client(served.url) as http:
        assert [p["id"] for p in (await http.get("/console/api/partners", headers=bearer(secret))).json()["partners"]] == ["biology"]


async def test_an_expired_token_or_one_of_a_disabled_user_opens_nothing(served):
    store = served.gateway.store
    expired_id, expired = new_token()
    assert await store.add_api_token(ApiToken(expired_id, "ada", "stale", time.time() - 100, None, time.time() - 1), expired)
    disabled_id, disabled = new_token()
    assert await store.add_api_token(ApiToken(disabled_id, "gone", "left-school", time.time(), None, None), disabled)
    live = await made_token(served, "ada")
    async with client(served.url) as http:
        for token in (expired, disabled):
            assert (await http.get("/console/api/partners", headers=bearer(token))).status_code == 401
            assert (await http.get(MEMORY.format(partner="algebra"), headers=bearer(token))).status_code == 401
        listed = (await http.get("/console/api/tokens", headers=bearer(live))).json()["tokens"]
    assert expired_id not in {t["id"] for t in listed}
    assert await store.prune() >= 1 and expired_id not in {t.id for t in await store.api_tokens()}


async def test_the_admin_api_takes_console_tokens_each_within_its_reach(served):
    """/api/v1 is per partner: a teacher's token reaches their partners (403 elsewhere, as config tokens); an
    administrator's every partner.  The rig runs a plugged-in responder, so a request let through answers 503."""
    ada, root = await made_token(served, "ada"), await made_token(served, "root")
    async with client(served.url) as http:
        assert (await http.get(MEMORY.format(partner="algebra"), headers=bearer(ada))).status_code == 503
        refused = await http.get(MEMORY.format(partner="biology"), headers=bearer(ada))
        assert refused.status_code == 403 and 'error="insufficient_scope"' in refused.headers["www-authenticate"]
        assert (await http.get(MEMORY.format(partner="no-such"), headers=bearer(ada))).status_code == 403
        assert (await http.get(MEMORY.format(partner="biology"), headers=bearer(root))).status_code == 503
        assert (await http.get(MEMORY.format(partner="no-such"), headers=bearer(root))).status_code == 404
        assert (await http.get(MEMORY.format(partner="algebra"), headers=bearer(PREFIX + "y" * 43))).status_code == 401


async def test_the_admin_api_keeps_taking_the_configs_tokens(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ADA_SCRIPT_TOKEN", "cfg-tok-garnet-3391")
    admin_tokens = [{"token": "env:ADA_SCRIPT_TOKEN", "teacher": "telegram:100"}]
    async with serve_console(tmp_path / "data", admin_tokens=admin_tokens) as running, client(running.url) as http:
        assert (await http.get(MEMORY.format(partner="algebra"), headers=bearer("cfg-tok-garnet-3391"))).status_code == 503
        assert (await http.get(MEMORY.format(partner="biology"), headers=bearer("cfg-tok-garnet-3391"))).status_code == 403
        # A config token is not a console token: the console API does not take it.
        assert (await http.get("/console/api/partners", headers=bearer("cfg-tok-garnet-3391"))).status_code == 401


async def test_no_token_reaches_the_logs(served, caplog):
    caplog.set_level(logging.DEBUG)
    token = await made_token(served, "ada")
    async with client(served.url) as http:
        await http.get("/console/api/partners", headers=bearer(token))
        await http.get(MEMORY.format(partner="biology"), headers=bearer(token))
        [listed] = (await http.get("/console/api/tokens", headers=bearer(token))).json()["tokens"]
        await http.delete(f"/console/api/tokens/{listed['id']}", headers=bearer(token))
        await http.get("/console/api/partners", headers=bearer(token))
    assert "console token created" in caplog.text and "console token revoked" in caplog.text  # the log did see it all
    assert token not in caplog.text and token[len(PREFIX):] not in caplog.text


async def test_a_name_no_store_can_keep_is_refused_not_a_500(served):
    """JSON can spell a lone surrogate (``"\\ud800"``), which SQLite cannot store: it is refused with 400."""
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = {"X-CSRF-Token": await csrf_of(ada), "Content-Type": "application/json"}
        refused = await ada.post("/console/api/tokens", content=b'{"name": "report-\\ud800"}', headers=csrf)
        assert refused.status_code == 400 and "name" in refused.json()["error"]
        for body in (b'{"name": "x", "expires_in_days": 0}', b'{"name": "x", "extra": 1}', b'[1]', b'{"name": ' + b'"y' * 5000 + b'"}'):
            assert (await ada.post("/console/api/tokens", content=body, headers=csrf)).status_code in (400, 413), body[:40]
        assert (await ada.get("/console/api/tokens")).json()["tokens"] == []
