"""`partners channels login weixin ACCOUNT`: the QR login from the terminal, against the iLink emulator on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import threading
from contextlib import closing

import httpx
import yaml

from channels.weixin.ilink.qr import terminal
from tests.peers.weixin_ilink_server import IlinkPeer, serving
from tests.waits import HANG_S


class _Served:
    """The emulator on its own event loop in a thread, since the command runs ``asyncio.run`` itself."""

    def __init__(self, peer: IlinkPeer) -> None:
        self.peer, self.url = peer, ""
        self._ready, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        async with serving(self.peer) as url:
            self.url = url
            self._ready.set()
            while not self._stop.is_set():
                await asyncio.sleep(0.02)

    def __enter__(self) -> str:
        self._thread.start()
        assert self._ready.wait(HANG_S)
        return self.url

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(HANG_S)


def _config(workdir, base: str, kind: dict | None = None) -> str:
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(workdir / "data"), "partners": [{"id": "t", "name": "T"}],
        "bindings": [{"partner": "t", "channel": "weixin", "account": "school"}],
        "channels": {"weixin": {"school": kind or {"base_url": base}}}}))
    return str(path)


def test_login_shows_the_qr_code_and_link_follows_the_scan_and_stores_the_token_unprinted(invoke, workdir):
    peer = IlinkPeer(auto_scan=True)
    with _Served(peer) as base:
        result = invoke("-c", _config(workdir, base), "channels", "login", "weixin", "school")
    assert result.exit_code == 0, result.output
    [code] = list(peer.logins)
    lines = result.output.splitlines()
    drawn = [line for line in lines if line and set(line) <= set("█▀▄ \xa0")]
    assert len(drawn) >= 11 and all(len(line) == len(drawn[0]) for line in drawn), result.output  # one square block
    link = next(line for line in lines if "https://liteapp.weixin.qq.com/q/" in line)
    assert lines.index(link) > lines.index(drawn[-1]) and link.endswith(f"/q/{code}")
    assert "\n".join(drawn) == terminal(f"https://liteapp.weixin.qq.com/q/{code}")  # the link is what it encodes
    assert [line for line in lines if line.startswith(("Waiting", "Scanned", "Confirmed"))] == [
        "Waiting for the scan…", "Scanned. Confirm the login in WeChat on the phone.", "Confirmed."]
    assert f"Logged in weixin/school as {peer.bot_id}" in result.output
    assert peer.token not in result.output
    assert peer.token not in (workdir / "partners.yaml").read_text()
    with closing(sqlite3.connect(workdir / "data" / "gateway.db")) as db:
        [(value,)] = db.execute("SELECT value FROM cursors WHERE channel = 'weixin' AND account = 'school' "
                                "AND name = 'ilink-session'").fetchall()
    assert json.loads(value)["token"] == peer.token


def test_login_refuses_an_official_account(invoke, workdir, monkeypatch):
    monkeypatch.setenv("WX_LOGIN_SECRET", "s")
    oa = {"kind": "official_account", "appid": "wx1", "appsecret": "env:WX_LOGIN_SECRET",
          "token": "env:WX_LOGIN_SECRET", "mode": "plaintext"}
    result = invoke("-c", _config(workdir, "http://127.0.0.1:9/", oa), "channels", "login", "weixin", "school")
    assert result.exit_code != 0
    assert "needs no login" in result.output


def test_the_channels_list_still_runs_without_a_subcommand(invoke):
    result = invoke("channels")
    assert result.exit_code == 0 and "weixin" in result.output


def _free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_login_prints_the_address_of_the_page_a_running_gateway_serves_for_the_account(invoke, workdir):
    """The account waits for a login in a served gateway; the command names the page's whole URL, which opens."""
    from gateway.app import Gateway
    from gateway.configfile import parse_config
    from gateway.core.channel import ChannelState
    from gateway.http.app import build_app
    from gateway.http.server import serve_http
    from tests.contract.harness import eventually

    peer = IlinkPeer(auto_scan=True)
    async with serving(peer) as base:
        path = _config(workdir, base)
        raw = yaml.safe_load(open(path))
        raw["http"] = {"host": "127.0.0.1", "port": _free_port()}
        raw["channels"]["weixin"]["school"]["access"] = {"dm": "open"}
        (workdir / "partners.yaml").write_text(yaml.safe_dump(raw))
        gateway = Gateway(parse_config(raw))
        await gateway.start()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", raw["http"]["port"],
                                                on_ready=ready.set_result, shutdown_timeout=1))
        try:
            await asyncio.wait_for(ready, HANG_S)
            await eventually(lambda: gateway.supervisor.health()["weixin:school"].state is ChannelState.ACTION_REQUIRED,
                             what="the account to wait for a login")
            result = await asyncio.to_thread(invoke, "-c", path, "channels", "login", "weixin", "school")
            assert result.exit_code == 0, result.output
            prefix = f"http://127.0.0.1:{raw['http']['port']}/channels/weixin/school/login?t="
            [line] = [line for line in result.output.splitlines() if prefix in line]
            url = line[line.index(prefix):]
            assert len(url) > len(prefix) + 16  # a token, not an empty one
            async with httpx.AsyncClient(trust_env=False) as http:
                opened = await http.get(url)
                assert opened.status_code == 200 and "<h1>" in opened.text, opened.text
                assert (await http.get(prefix + "not-the-token")).status_code == 403
                assert (await http.get(url.split("?")[0])).status_code == 403
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
            await gateway.stop()


def test_login_without_a_waiting_gateway_says_where_the_page_will_be(invoke, workdir):
    with _Served(IlinkPeer(auto_scan=True)) as base:
        result = invoke("-c", _config(workdir, base), "channels", "login", "weixin", "school")
    assert result.exit_code == 0, result.output
    assert "/login?t=" not in result.output and "while the account waits for a login" in result.output
