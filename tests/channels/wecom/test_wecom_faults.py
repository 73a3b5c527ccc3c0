"""What WeCom answers in an ack when it refuses a reply, and what the channel makes of it.

The long connection has no HTTP status: WeCom refuses a reply or a push with an errcode in the ack body
(45009 over the call limit, -1 system busy, 40001 a bad credential, 40058 a bad parameter), and gives no
retry hint.  The emulator refuses the next one so; the gateway must translate it into its error tree and,
where the error is transient, show the answer once after one paced retry -- no second retry layer in the SDK.
"""

from __future__ import annotations

import pytest

from gateway.core.errors import AuthFailed, BadRequest, PeerUnavailable, RateLimited, TransientError
from gateway.core.messages import Referrer, RenderedPart
from tests.contract.harness import counter


@pytest.mark.parametrize("errcode, kind", [(45009, "RateLimited"), (-1, "PeerUnavailable")], ids=["45009", "system-busy"])
async def test_a_refused_answer_is_retried_once_and_shows_once(rig, errcode, kind):
    rig.server.fail_next(errcode, "refused")
    await rig.server.say("busy day?")
    [answer] = await rig.answers("learner1", 1)
    await rig.quiet()
    assert answer.content == "echo: busy day?" and answer.finished == 1
    assert rig.server.refused == [errcode]
    assert rig.server.send_requests == 2  # the refused reply and one retry: the SDK does not retry by itself
    assert counter(rig.gateway, "partners_errors_total", channel="wecom", kind=kind) == 1


@pytest.mark.parametrize("errcode, error", [(45009, RateLimited), (-1, PeerUnavailable), (40001, AuthFailed),
                                            (40058, BadRequest)], ids=["45009", "system-busy", "40001", "40058"])
async def test_an_ack_errcode_is_its_place_in_the_error_tree_and_names_the_code(rig, errcode, error):
    await rig.server.say("hi")
    await rig.answers("learner1", 1)
    await rig.quiet()
    message = rig.responder.turns[0].messages[0]
    channel = rig.gateway.channel("wecom", "school")
    rig.server.fail_next(errcode, "refused")
    with pytest.raises(error) as caught:
        await channel.send(message.address, RenderedPart(index=0, text="sent directly"), referrer=Referrer(),
                           idempotency_key="direct")
    assert caught.value.platform == "wecom" and str(errcode) in str(caught.value)
    assert isinstance(caught.value, TransientError) == (errcode in (45009, -1))
