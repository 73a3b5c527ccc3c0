"""Another site's page cannot drive the gateway, and a foreign Host name is not served.

A page at ``evil.example`` that a learner visits can POST to the gateway on
their machine (to spend model tokens, or write as them), or re-point its own
name to 127.0.0.1 (DNS rebinding) to read ``/status`` and ``/metrics``.  The
gateway requires JSON for web chat posts (a cross-site form or ``text/plain``
post is refused with 415), refuses writes a browser marks as cross-site (403)
and serves only the host names it knows (421).  Everything runs over a real
socket against a real gateway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.e2e.rig import WebLearner, served
from tests.pipeline.conftest import ScriptedResponder
from tests.waits import HTTP_S

MESSAGE = {"message_id": "m1", "text": "what is 7 x 8?"}


@asynccontextmanager
async def gateway_at(data_dir: Path, **http: Any) -> AsyncIterator[str]:
    config = parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0, **http},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })
    async with Gateway(config, responder=ScriptedResponder()) as gateway, served(gateway) as url:
        yield url


@pytest.fixture
async def learner(tmp_path: Path) -> AsyncIterator[WebLearner]:
    async with gateway_at(tmp_path / "data") as url:
        learner = await WebLearner(url).open()
        try:
            yield learner
        finally:
            await learner.close()


# --------------------------------------------------------------------------- cross-site posts


@pytest.mark.parametrize(
    "content",
    [
        {"content": "message_id=m1&text=hi", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
        {"content": '{"message_id": "m1", "text": "hi"}', "headers": {"Content-Type": "text/plain"}},
        {"content": '{"message_id": "m1", "text": "hi"}', "headers": {}},
    ],
    ids=["form", "text-plain", "no-content-type"],
)
async def test_a_post_that_is_not_declared_json_is_415(learner: WebLearner, content: dict[str, Any]) -> None:
    response = await learner.http.post("/api/messages", **content)
    assert response.status_code == 415
    assert response.json() == {"error": "send the body as JSON, with Content-Type: application/json"}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://chat.evil.example"},
    ],
    ids=["foreign-origin", "opaque-origin", "cross-site", "same-site"],
)
async def test_a_write_from_another_sites_page_is_403(learner: WebLearner, headers: dict[str, str]) -> None:
    for path in ("/api/messages", "/api/session"):
        response = await learner.http.post(path, json=MESSAGE, headers=headers)
        assert response.status_code == 403, path
        assert response.json() == {"error": "requests from another site's page are refused"}


async def test_the_pages_own_posts_pass(learner: WebLearner) -> None:
    origin = str(learner.http.base_url.copy_with(path="")).rstrip("/")
    same = {"Origin": origin, "Sec-Fetch-Site": "same-origin"}
    response = await learner.http.post("/api/messages", json=MESSAGE, headers=same)
    assert response.status_code == 202
    assert (await learner.http.post("/api/messages", json={**MESSAGE, "message_id": "m2"})).status_code == 202  # curl


# --------------------------------------------------------------------------- foreign Host headers


async def get(url: str, path: str, host: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=HTTP_S) as http:
        return await http.get(path, headers={"Host": host})


async def post_update(url: str, host: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=HTTP_S) as http:
        return await http.post("/webhooks/telegram/main", json={"update_id": 1}, headers={"Host": host})


async def test_a_rebound_name_cannot_read_status_or_metrics(tmp_path: Path) -> None:
    async with gateway_at(tmp_path / "data") as url:
        port = url.rsplit(":", 1)[1]
        for path in ("/status", "/metrics", "/channels/webchat/default/"):
            refused = await get(url, path, f"evil.example:{port}")
            assert refused.status_code == 421, path
            assert "does not serve the host 'evil.example'" in refused.json()["error"]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert (await get(url, "/status", host)).status_code == 200, host
        assert (await get(url, "/status", "")).status_code == 421


async def test_configured_names_are_served(tmp_path: Path) -> None:
    async with gateway_at(tmp_path / "data", public_url="https://tutor.school.example/",
                          allowed_hosts=["gateway.lan", "*.partners.example"]) as url:
        for host in ("tutor.school.example", "gateway.lan:8780", "maths.partners.example", "192.168.1.20:8780"):
            assert (await get(url, "/healthz", host)).status_code == 200, host
        for host in ("partners.example.evil", "school.example"):
            assert (await get(url, "/healthz", host)).status_code == 421, host


async def test_platform_webhooks_still_reach_their_route_through_the_public_host(tmp_path: Path) -> None:
    """A platform posts to the public URL with no Origin or Sec-Fetch-Site: the guard lets it through."""
    async with gateway_at(tmp_path / "data", public_url="https://tutor.school.example") as url:
        response = await post_update(url, "tutor.school.example")
    assert response.status_code == 404  # routed: no such channel account runs here -- not 421 or 403
    assert response.json() == {"error": "no running channel account telegram/main"}


async def test_a_proxy_that_rewrites_host_keeps_the_public_origin_working(tmp_path: Path) -> None:
    async with gateway_at(tmp_path / "data", public_url="https://tutor.school.example") as url:
        learner = await WebLearner(url).open()
        try:
            response = await learner.http.post("/api/messages", json=MESSAGE,
                                               headers={"Origin": "https://tutor.school.example"})
        finally:
            await learner.close()
    assert response.status_code == 202
