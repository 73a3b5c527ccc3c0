"""Contract harness for the ``wecom`` channel's self-built app (``kind: app``), against the WeCom app emulator.

The emulator is tests/peers/wecom_app_server.py, served as
tests/contract/tencent_harness.py says.  Every answer is an app message --
what the member's chat shows.

Features: ``credentials`` (a corpsecret WeCom refuses, 40001), ``slow_send``
(``message/send`` answers late, after taking the text), and ``faults`` with
``errcodes``: WeCom refuses in a 200 with its own errcode and no retry hint, so
the suite's statuses become the codes that mean the same (`TencentHarness.ERRCODES`; 401
is 40001 twice, since the first is a stale token the kit refreshes once).  The
app talks 1:1 (no ``groups``), WeCom never delivers the app's own messages (no
``own_echo``).  No ``outage``: WeCom posts to the app, so an app cannot see
WeCom gone until it sends.
"""

from __future__ import annotations

from typing import Any

from tests.channels.wecom.app_rig import app_settings
from tests.contract.harness import Seen
from tests.contract.tencent_harness import TencentHarness
from tests.peers.wecom_app_server import WecomApp


class WecomAppHarness(TencentHarness):
    channel = "wecom"
    env_prefix = "WECOM_APP_C"
    chat_prefix = "member"
    peer: WecomApp

    def __init__(self) -> None:
        super().__init__(WecomApp())

    features = frozenset({"credentials", "slow_send", "faults", "errcodes"})

    async def slow_sends(self, seconds: float) -> None:
        self.peer.send_delay_s = seconds

    def settings(self) -> dict[str, Any]:
        return app_settings(self.peer, self.api, self.env)

    async def seen(self, chat: str) -> list[Seen]:
        """Every app message to ``chat``: a text; a news card (a file known by its URL) as its title and
        picture (or link); an uploaded image or file as its ``media_id``."""
        shown = []
        for i, message in enumerate(m for m in self.peer.sent if m["touser"] == chat):
            if message["msgtype"] == "news":
                [article] = message["news"]["articles"]
                picture = (article["picurl"],) if article.get("picurl") else ()
                shown.append(Seen(id=f"{chat}:{i}", text=article["title"], attachments=picture or (article["url"],)))
            elif message["msgtype"] == "text":
                shown.append(Seen(id=f"{chat}:{i}", text=message["text"]["content"]))
            else:
                shown.append(Seen(id=f"{chat}:{i}", text="", attachments=(message[message["msgtype"]]["media_id"],)))
        return shown
