"""`partners channels login weixin ACCOUNT`: the QR login from the terminal, against the iLink emulator on loopback."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from contextlib import closing

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
