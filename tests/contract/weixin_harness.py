"""Contract harness for the ``weixin`` channel, an Official Account in safe mode, against the WeChat emulator.

The emulator is tests/peers/weixin_oa_server.py, served as
tests/contract/tencent_harness.py says.  Passive replies are off, so every
answer is a customer-service message -- what the learner's chat shows.

Features: ``credentials`` (an appsecret WeChat refuses, 40125).  Official Accounts are 1:1 (no ``groups``), WeChat never
delivers the account's own messages (no ``own_echo``), and the emulator's
faults are WeChat's own errcodes, not the suite's HTTP statuses (its tests in
tests/channels/weixin/ cover 40001, 45015 and the window).
"""

from __future__ import annotations

from typing import Any

from tests.channels.weixin.conftest import account_settings
from tests.contract.tencent_harness import TencentHarness
from tests.peers.weixin_oa_server import WechatOA


class WeixinHarness(TencentHarness):
    channel = "weixin"
    env_prefix = "WEIXIN_C"
    chat_prefix = "o-learner-"
    peer: WechatOA

    def __init__(self) -> None:
        super().__init__(WechatOA(mode="safe"))

    def settings(self) -> dict[str, Any]:
        return {**account_settings(self.peer, self.api, self.env), "passive_reply": False}
