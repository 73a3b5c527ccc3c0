"""Forged, unreadable and replayed webhooks, for every webhook channel, derived from its declared scheme.

Each variant runs against a real gateway with two accounts of the channel.
A forged request is refused (401, or 404 for an account that does not
exist) before anything is stored; an authentic body the channel cannot read is
dropped (400, or 200 with the event counted as invalid, so the platform stops
resending it); neither ever reaches the model.  Every case ends with a
positive control -- the genuine request, answered exactly once -- so "nothing
reached the model" cannot pass on a rig that answers nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.contract.harness import counter, eventually
from tests.security.probes.registry import WEBHOOK_CHANNELS
from tests.security.probes.webhooks import Expect, Forgery, WebhookRig, forgeries, post

CASES = [(channel, name) for channel, declared in WEBHOOK_CHANNELS.items() for name in declared.forgery_names()]
REPLAYS = 50


def _variant(rig: WebhookRig, channel: str, name: str) -> Forgery:
    valid = rig.event(1, "genuine")
    [forgery] = [f for f in forgeries(rig.scheme, rig.secrets, valid, WEBHOOK_CHANNELS[channel].malformed) if f.name == name]
    return forgery


async def _genuine(rig: WebhookRig, number: int, text: str) -> int:
    """Send the genuine, signed event ``number`` and return the status the gateway answered."""
    account = next(iter(rig.secrets))
    body = rig.event(number, text)
    forgery = Forgery(name="genuine", expect=Expect.DROPPED, account=account, body=body,
                      headers=tuple(rig.scheme.sign(rig.secrets[account], body)))
    return (await post(rig, forgery)).status_code


@pytest.mark.parametrize(("channel", "name"), CASES)
async def test_a_forged_or_unreadable_webhook_never_reaches_the_model(channel: str, name: str,
                                                                      request: pytest.FixtureRequest, tmp_path: Path) -> None:
    async with WEBHOOK_CHANNELS[channel].open(request, tmp_path / "data") as rig:
        forgery = _variant(rig, channel, name)
        answer = await post(rig, forgery)
        if forgery.expect is Expect.REFUSED:
            assert answer.status_code == (404 if forgery.account not in rig.secrets else 401), answer.text
            assert rig.inbound_rows() == 0
        elif forgery.expect is Expect.TOO_LARGE:
            assert answer.status_code == 413, answer.text
            assert rig.inbound_rows() == 0
        else:
            assert answer.status_code in (200, 400), answer.text
            if answer.status_code == 200:  # acknowledged so the platform stops resending it -- and counted
                assert counter(rig.gateway, "partners_dropped_total", channel=channel, reason="invalid event") == 1
        assert set(answer.json()) <= {"error", "ok"}, "an error is one short JSON line, never a traceback"
        await rig.settle()
        assert await rig.turns() == 0 and await rig.replies() == 0

        assert await _genuine(rig, 7, "the real one") == 200  # the positive control
        await eventually(rig.replies, what="the genuine event's reply")
        await rig.settle()
        assert (await rig.turns(), await rig.replies()) == (1, 1)


@pytest.mark.parametrize("channel", list(WEBHOOK_CHANNELS))
async def test_one_event_replayed_many_times_at_once_is_answered_once(channel: str, request: pytest.FixtureRequest,
                                                                       tmp_path: Path) -> None:
    async with WEBHOOK_CHANNELS[channel].open(request, tmp_path / "data") as rig:
        statuses = await asyncio.gather(*(_genuine(rig, 42, "say it once") for _ in range(REPLAYS)))
        assert set(statuses) == {200}, "every copy is acknowledged, so the platform stops resending"
        await eventually(rig.replies, what="the reply")
        await rig.settle()
        for _ in range(3):  # and later copies, one by one, after the answer went out
            assert await _genuine(rig, 42, "say it once") == 200
        await rig.settle()
        assert (await rig.turns(), await rig.replies(), rig.inbound_rows()) == (1, 1, 1)
