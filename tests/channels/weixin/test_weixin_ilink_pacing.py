"""Personal WeChat's account-wide pace: one WeChat account, however many learners, sends like a person would.

In virtual time (tests/test_pacing.py's FakeClock) through the pacer the gateway
builds for every account from its declared capabilities -- here the iLink
kind's row of platforms.toml -- so the numbers asserted are the data's.
"""

from __future__ import annotations

import asyncio

from channels.registry import load_channel
from gateway.pacing import Pacer
from tests.test_pacing import FakeClock, sent_at, settle


async def test_a_burst_over_many_learners_is_paced_for_the_whole_account():
    declared = load_channel("weixin").capabilities()  # the default kind: personal WeChat (ilink)
    rate = declared.send_rate_global
    assert rate is not None and rate.burst < 10
    clock = FakeClock()
    pacer = Pacer(declared, clock=clock)
    sends = [asyncio.ensure_future(sent_at(clock, pacer, f"learner-{n}@im.wechat")) for n in range(rate.burst + 3)]
    await settle()
    await clock.advance(120)
    times = [await s for s in sends]
    step = rate.per / rate.rate
    assert times[: rate.burst] == [0.0] * rate.burst  # the burst goes at once: each learner's first message
    assert times[rate.burst:] == [step * (n + 1) for n in range(3)]  # then the account's rate, across learners


async def test_one_learner_is_paced_by_the_chat_rate_and_the_account_rate_together():
    declared = load_channel("weixin").capabilities()
    chat, account = declared.send_rate_chat, declared.send_rate_global
    assert chat is not None and account is not None
    clock = FakeClock()
    pacer = Pacer(declared, clock=clock)
    sends = [asyncio.ensure_future(sent_at(clock, pacer, "learner@im.wechat")) for _ in range(4)]
    await settle()
    await clock.advance(120)
    times = [await s for s in sends]
    assert times[:chat.burst] == [0.0] * chat.burst
    assert all(b - a >= chat.per / chat.rate - 1e-9 for a, b in zip(times[chat.burst - 1:], times[chat.burst:], strict=False))
