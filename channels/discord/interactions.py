"""The optional HTTP interactions endpoint: with it set, Discord POSTs slash commands here, not on the Gateway.

The teacher sets the application's Interactions Endpoint URL to
``https://<public_url>/webhooks/discord/<account>`` and the account's
``public_key``.  Every request is signed with Ed25519 over
``X-Signature-Timestamp`` + the raw body (D4); Discord itself sends forged ones
to test the endpoint.  A bad signature, a timestamp outside
``signature_window_s`` or a signature already seen inside it is the kit's
ForgedRequest, which the HTTP app answers 401.

A PING (type 1) is answered ``{"type": 1}`` and stores nothing.  A slash
command is made durable first and answered type 5 (deferred: the learner sees
"thinking...") only then, inside Discord's 3 s, on the kit's ack clock; the
answer follows through the interaction's webhook exactly as on the Gateway.
The same interaction delivered twice carries one snowflake, so the pipeline's
dedup answers it once; each delivery is still answered type 5.  Anything else
(a component, a modal, a command we did not register, a body that is not an
interaction) is an InvalidEvent: counted by the sink, answered 400.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from channels._kit.ack import AckClock
from channels._kit.replay import ReplayMemory
from channels._kit.signatures import ed25519_public_key, verify_ed25519
from channels.discord.decode import InteractionPayload, decode_interaction
from channels.discord.transport import PLATFORM
from gateway.core.capabilities import capabilities_of
from gateway.core.channel import InboundSink
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId

PING, PONG, DEFERRED = 1, 1, 5
WINDOW_S = capabilities_of(PLATFORM).signature_window_s


class InteractionsEndpoint:
    """One account's endpoint: its application's key, the signatures seen lately, its ack clock."""

    def __init__(self, public_key: str, account: AccountId) -> None:
        self.key = ed25519_public_key(public_key)
        self.account = account
        self.replays = ReplayMemory.for_platform(PLATFORM)
        self.acks = AckClock.of(PLATFORM, account)

    async def answer(self, request: Request, sink: InboundSink, *, token_lifetime_s: float) -> Response:
        body = await request.body()
        verified = verify_ed25519(self.key, request.headers, body, window_s=WINDOW_S, replays=self.replays)
        try:
            payload = InteractionPayload.model_validate_json(body)
            if payload.type == PING:
                return JSONResponse({"type": PONG})
            inbound = decode_interaction(payload, account=self.account, token_lifetime_s=token_lifetime_s)
        except ValidationError as error:
            sink.invalid(f"discord interaction: not an interaction ({error.error_count()} fields wrong)")
            raise InvalidEvent(f"not an interaction: {error.errors()[0]['msg']}") from None
        except InvalidEvent as error:
            sink.invalid(f"discord {error}")
            raise
        return await self.acks.accept_then_answer(sink, [inbound], JSONResponse({"type": DEFERRED}),
                                                  verified=verified, replays=self.replays)
