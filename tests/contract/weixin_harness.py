"""Contract harness for the ``weixin`` channel, an Official Account in safe mode, against the WeChat emulator.

The emulator is tests/peers/weixin_oa_server.py, served as
tests/contract/tencent_harness.py says.  Passive replies are off, so every
answer is a customer-service message -- what the learner's chat shows.

Features: ``credentials`` (an appsecret WeChat refuses, 40125); ``faults`` with
``errcodes``: WeChat refuses a call in a 200 with its own errcode and says no
retry-after, so the suite's statuses become the codes that mean the same
(`TencentHarness.ERRCODES`: 429 -> 45009 quota reached, 401 -> 40001 token not good --
twice, since the first is worth one fresh token -- 503 -> -1 system busy, 400 ->
45002 content too long); ``slow_send`` (a send answered late, after it was taken).

Not declared: ``groups`` (Official Accounts are 1:1), ``own_echo`` (WeChat never
delivers the account's own messages), ``outage`` (inbound is WeChat's callback:
an account with no connection of its own has nothing to report while WeChat is
away -- its sends fail and are retried, tests/channels/weixin), ``lost_response``
(``message/custom/send`` takes no idempotency key, so a send whose answer is
lost may show twice; nothing the channel could do about it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tests.channels.weixin.conftest import account_settings
from tests.contract.tencent_harness import TencentHarness
from tests.peers.weixin_oa_server import WechatOA


class WeixinHarness(TencentHarness):
    channel = "weixin"
    features: ClassVar[frozenset[str]] = frozenset({"credentials", "faults", "errcodes", "slow_send"})
    env_prefix = "WEIXIN_C"
    chat_prefix = "o-learner-"
    peer: WechatOA

    def __init__(self) -> None:
        super().__init__(WechatOA(mode="safe"))

    def settings(self) -> dict[str, Any]:
        return {**account_settings(self.peer, self.api, self.env), "passive_reply": False}

    async def slow_sends(self, seconds: float) -> None:
        self.peer.send_latency_s = seconds
