"""The teachers' JSON API: bearer tokens only, each teacher's token reaches only their partners, bodies are bounded.

Two teachers run the gateway: Ada (``telegram:100``, partners ``algebra`` and
``geometry``) and Ben (``matrix:@ben:school.example``, partner ``biology``).
Ann has spoken to every partner.  The operator holds ``http.admin_token``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.session_log import SessionLog
from brain.tools.services import MemoryEntry
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.config import Config
from gateway.core.errors import ConfigError
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn
from gateway.http.admin import MAX_NOTES_BYTES
from gateway.http.app import build_app

OPERATOR, ADA, ADA_ALGEBRA, BEN = "operator-token-0001", "ada-token-0002", "ada-algebra-only-0003", "ben-token-0004"
ANN = "webchat:default:ann"


def memory(partner: str) -> str:
    return f"/api/v1/partners/{partner}/learners/{ANN}/memory"


def raw_config(tmp_path: Path, **http: Any) -> dict[str, Any]:
    ada = [{"channel": "telegram", "user": "100"}]
    return {
        "data_dir": str(tmp_path),
        "partners": [
            {"id": "algebra", "name": "Algebra", "owners": ada},
            {"id": "geometry", "name": "Geometry", "owners": [{"channel": "matrix", "user": "@ada:school.example"}, *ada]},
            {"id": "biology", "name": "Biology", "owners": [{"channel": "matrix", "user": "@ben:school.example"}]},
        ],
        "http": http,
    }


TOKENS = {
    "admin_token": "env:T_OPERATOR",
    "admin_tokens": [
        {"token": "env:T_ADA", "teacher": "telegram:100"},
        {"token": "env:T_ADA_ALGEBRA", "teacher": "telegram:100", "partners": ["algebra"]},
        {"token": "env:T_BEN", "teacher": "matrix:@ben:school.example"},
    ],
}


@pytest.fixture(autouse=True)
def _tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"T_OPERATOR": OPERATOR, "T_ADA": ADA, "T_ADA_ALGEBRA": ADA_ALGEBRA, "T_BEN": BEN}.items():
        monkeypatch.setenv(name, value)


async def remember_ann(config: Config) -> None:
    address = Address(channel="webchat", account="default", conversation=Conversation(chat="dm-ann", kind=ConversationKind.DIRECT))
    sender = Sender(user="ann", display_name="Ann")
    message = InboundMessage(event_id="ann-1", address=address, sender=sender, elements=(Text(text="hi"),),
                             received_at=datetime.now(UTC))
    store, log = MemoryStore(config.data_dir / "memory.db"), SessionLog(config.data_dir / "brain.db")
    for partner in config.partners:
        await MemoryService(store, log).write(Turn(partner, address, sender, Role.LEARNER, [message]),
                                              MemoryEntry(f"Ann studies {partner.id}", key=partner.id))
    store.close()
    log.close()


async def client_for(config: Config) -> httpx.AsyncClient:
    app = build_app(Gateway(config))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = parse_config(raw_config(tmp_path, **TOKENS))
    await remember_ann(config)
    async with await client_for(config) as http:
        yield http


def bearer(token: str, scheme: str = "Bearer") -> dict[str, str]:
    return {"Authorization": f"{scheme} {token}"}


# --------------------------------------------------------------------------- the scheme


async def test_a_token_without_the_bearer_scheme_is_refused_with_a_challenge(api):
    for header in (OPERATOR, f"Basic {OPERATOR}", f"Token {OPERATOR}", "Bearer", "Bearer   ", f"Bearer{OPERATOR}"):
        response = await api.get(memory("algebra"), headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.headers["www-authenticate"].startswith("Bearer"), header
        assert "Bearer" in response.json()["error"]
    missing = await api.get(memory("algebra"))
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="partners"'


async def test_the_scheme_is_case_insensitive(api):
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
        assert (await api.get(memory("algebra"), headers=bearer(OPERATOR, scheme))).status_code == 200, scheme


async def test_a_wrong_token_is_refused_as_invalid(api):
    response = await api.get(memory("algebra"), headers=bearer("not-a-token"))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="partners", error="invalid_token"'


# --------------------------------------------------------------------------- per-teacher scope


async def test_a_teachers_token_reaches_every_partner_they_own_and_no_other(api):
    for partner in ("algebra", "geometry"):  # geometry lists Ada's telegram account second: any of her accounts counts
        response = await api.get(memory(partner), headers=bearer(ADA))
        assert response.status_code == 200 and f"Ann studies {partner}" in str(response.json())
    refused = await api.get(memory("biology"), headers=bearer(ADA))
    assert refused.status_code == 403
    assert "biology" in refused.json()["error"] and refused.headers["www-authenticate"].endswith('error="insufficient_scope"')
    assert (await api.delete(memory("biology"), headers=bearer(ADA))).status_code == 403
    assert (await api.put(memory("biology"), headers=bearer(ADA), json={"markdown": "# mine now"})).status_code == 403
    assert "Ann studies biology" in str((await api.get(memory("biology"), headers=bearer(BEN))).json())
    assert (await api.get(memory("algebra"), headers=bearer(BEN))).status_code == 403


async def test_a_token_narrowed_to_some_partners_reaches_only_those(api):
    assert (await api.get(memory("algebra"), headers=bearer(ADA_ALGEBRA))).status_code == 200
    assert (await api.get(memory("geometry"), headers=bearer(ADA_ALGEBRA))).status_code == 403


async def test_an_unknown_partner_looks_the_same_as_someone_elses_to_a_teacher(api):
    """A teacher's token cannot list the gateway's partners by trying names; the operator's is told."""
    assert (await api.get(memory("chemistry"), headers=bearer(ADA))).status_code == 403
    assert (await api.get(memory("chemistry"), headers=bearer(OPERATOR))).status_code == 404


async def test_the_operators_token_reaches_every_partner(api):
    for partner in ("algebra", "geometry", "biology"):
        assert (await api.get(memory(partner), headers=bearer(OPERATOR))).status_code == 200


async def test_teachers_tokens_alone_turn_the_api_on(tmp_path):
    config = parse_config(raw_config(tmp_path, admin_tokens=TOKENS["admin_tokens"]))
    await remember_ann(config)
    async with await client_for(config) as http:
        assert (await http.get(memory("algebra"), headers=bearer(ADA))).status_code == 200
        assert (await http.get(memory("algebra"), headers=bearer(OPERATOR))).status_code == 401


@pytest.mark.parametrize(("entry", "field", "words"), [
    ({"token": "env:T_ADA", "teacher": "telegram:999"}, "http.admin_tokens.0.teacher", "owns no partner"),
    ({"token": "env:T_ADA", "teacher": "telegram:100", "partners": ["biology"]}, "http.admin_tokens.0.partners",
     "does not own biology"),
    ({"token": "env:T_OPERATOR", "teacher": "telegram:100"}, "http", "same value"),
    ({"token": "env:T_ADA", "teacher": "ada"}, "http.admin_tokens.0.teacher", "CHANNEL:USER"),
])
def test_a_token_that_reaches_nothing_or_someone_elses_partner_is_a_config_error(tmp_path, entry, field, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw_config(tmp_path, admin_token="env:T_OPERATOR", admin_tokens=[entry]))
    text = str(caught.value)
    assert field in text and words in text
    assert OPERATOR not in text and ADA not in text


# --------------------------------------------------------------------------- sizes


async def test_notes_over_the_limit_are_refused_with_413_and_left_unchanged(api):
    auth = bearer(ADA)
    too_long = {"markdown": "x" * (MAX_NOTES_BYTES + 1)}
    response = await api.put(memory("algebra"), headers=auth, json=too_long)
    assert response.status_code == 413
    assert "KiB" in response.json()["error"]
    assert "Ann studies algebra" in str((await api.get(memory("algebra"), headers=auth)).json())

    async def streamed() -> AsyncIterator[bytes]:  # no Content-Length: the limit holds while the body streams in
        yield b'{"markdown": "'
        for _ in range(MAX_NOTES_BYTES // 1024 + 1):
            yield b"y" * 1024
        yield b'"}'

    chunked = await api.put(memory("algebra"), headers=auth, content=streamed())
    assert chunked.status_code == 413


async def test_notes_within_the_limit_are_saved(api):
    notes = "# Ann\n\n" + "Prefers worked examples. " * ((MAX_NOTES_BYTES - 200) // 25)
    response = await api.put(memory("algebra"), headers=bearer(ADA), json={"markdown": notes})
    assert response.status_code == 200
    shown = await api.get(memory("algebra") + ".md", headers=bearer(ADA))
    assert "Prefers worked examples." in shown.text
