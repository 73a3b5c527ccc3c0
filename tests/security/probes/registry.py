"""Every channel that receives webhooks: the one list the webhook suites run over.

A new webhook channel joins the forged-webhook, replay and flood probes by
adding one entry here: its :class:`~tests.security.probes.webhooks.WebhookScheme`,
its rig (two accounts, a minimal valid event, a reply counter at its peer) and
the bodies it cannot read.
"""

from __future__ import annotations

from tests.security.probes import telegram
from tests.security.probes.webhooks import WebhookChannel

WEBHOOK_CHANNELS: dict[str, WebhookChannel] = {
    "telegram": WebhookChannel(scheme=telegram.SCHEME, open=telegram.telegram_rig, malformed=telegram.malformed()),
}
