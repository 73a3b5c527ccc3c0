"""The teachers' JSON API over memory controls: off by default, token-guarded, same data as the CLI."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.session_log import SessionLog
from brain.tools.services import MemoryEntry
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn
from gateway.http.app import build_app

URL = "/api/v1/partners/tutor/learners/webchat:default:ann/memory"


def config(tmp_path, token: bool):
    raw = {
        "data_dir": str(tmp_path),
        "partners": [{"id": "tutor", "name": "Tutor", "owners": [{"channel": "console", "user": "teacher"}]}],
        "http": {"admin_token": "env:ADMIN_TOKEN"} if token else {},
    }
    return parse_config(raw)


async def remember_ann(cfg) -> None:
    address = Address(channel="webchat", account="default", conversation=Conversation(chat="dm-ann", kind=ConversationKind.DIRECT))
    sender = Sender(user="ann", display_name="Ann")
    message = InboundMessage(event_id="ann-1", address=address, sender=sender, elements=(Text(text="hi"),),
                             received_at=datetime.now(UTC))
    store, log = MemoryStore(cfg.data_dir / "memory.db"), SessionLog(cfg.data_dir / "brain.db")
    await MemoryService(store, log).write(Turn(cfg.partner("tutor"), address, sender, Role.LEARNER, [message]),
                                          MemoryEntry("Ann's exam is on Friday", key="exam"))
    store.close()
    log.close()


@pytest.fixture
async def client(tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_TOKEN", "s3cret-token")
    cfg = config(tmp_path, token=True)
    await remember_ann(cfg)
    app = build_app(Gateway(cfg))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        yield http


async def test_without_a_config_token_the_api_asks_for_a_console_token(tmp_path):
    """The console's API tokens (ADR 0041) are the API's own now: a gateway with a store is never "off"."""
    app = build_app(Gateway(config(tmp_path, token=False)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        response = await http.get(URL)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")


async def test_wrong_or_missing_tokens_are_refused(client):
    assert (await client.get(URL)).status_code == 401
    assert (await client.get(URL, headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_export_edit_markdown_and_delete(client):
    auth = {"Authorization": "Bearer s3cret-token"}
    exported = (await client.get(URL, headers=auth)).json()
    assert "Ann's exam is on Friday" in str(exported)
    edited = await client.put(URL, headers=auth, json={"markdown": "# Ann\n\nPrefers worked examples."})
    assert edited.status_code == 200
    shown = await client.get(URL + ".md", headers=auth)
    assert "Prefers worked examples." in shown.text
    deleted = await client.delete(URL, headers=auth)
    assert deleted.status_code == 200 and deleted.json()["deleted"]
    assert "Ann's exam is on Friday" not in str((await client.get(URL, headers=auth)).json())


async def test_bad_requests_get_clear_errors(client):
    auth = {"Authorization": "Bearer s3cret-token"}
    assert (await client.get("/api/v1/partners/nobody/learners/webchat:default:ann/memory", headers=auth)).status_code == 404
    assert (await client.get("/api/v1/partners/tutor/learners/not-an-identity/memory", headers=auth)).status_code == 400
    assert (await client.get("/api/v1/partners/tutor/learners/webchat:default:zed/memory", headers=auth)).status_code == 404
    assert (await client.put(URL, headers=auth, content=b"not json")).status_code == 400
