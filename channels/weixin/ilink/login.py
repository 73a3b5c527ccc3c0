"""The QR login: a code to scan, its states (wait -> scanned -> confirmed), and the session it brings, stored.

``partners channels login weixin ACCOUNT`` runs :func:`login`: it asks for a
QR code, hands its link to ``show`` (the terminal draws it; the gateway's
login page, :mod:`channels.weixin.ilink.page`, shows it), and follows
``get_qrcode_status`` -- held open by the platform -- until the teacher's
WeChat confirms.  A code that expires before that is replaced by a fresh one,
up to :data:`CODES` times.  The confirmed answer's ``bot_token`` and
``baseurl`` are stored (:mod:`channels.weixin.ilink.session`) and the token is
registered with the log scrubber before anything can log it; nothing here
logs it, and ``show``/``said`` are handed only the link and the states.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum

from channels.weixin.config import IlinkConfig
from channels.weixin.ilink.session import IlinkSession, save
from channels.weixin.ilink.transport import PLATFORM, IlinkApi
from gateway.core.channel import CursorStore
from gateway.core.errors import AuthFailed, PeerUnavailable
from gateway.redaction import register_secret

log = logging.getLogger(__name__)
CODES = 3
"""QR codes offered before the login gives up (each lasts a few minutes on the platform)."""
STATUS_HOLD_S = 30.0


class Scan(str, Enum):
    WAIT = "wait"
    SCANNED = "scaned"  # the platform's spelling
    CONFIRMED = "confirmed"
    EXPIRED = "expired"


async def login(settings: IlinkConfig, cursors: CursorStore, *, account: str, show: Callable[[str], None],
                said: Callable[[Scan], None], api: IlinkApi | None = None) -> IlinkSession:
    """Log the account in by QR code and store the session; raises AuthFailed when no code was confirmed."""
    api = api or IlinkApi(settings.base_url, None, account=account)
    try:
        for _ in range(CODES):
            code, link = await api.qrcode()
            show(link)
            session = await _follow(api, code, said)
            if session is None:
                continue
            if settings.bot_id and session.bot_id != settings.bot_id:
                raise AuthFailed(PLATFORM, f"the WeChat that scanned is bot {session.bot_id}, the config says "
                                           f"{settings.bot_id}: scan with the right WeChat")
            await save(cursors, session)
            log.info("weixin ilink login confirmed account=%s bot=%s", account, session.bot_id)
            return session
    finally:
        await api.close()
    raise AuthFailed(PLATFORM, f"no QR code was confirmed in {CODES} tries: run the login again and scan within a minute")


async def _follow(api: IlinkApi, code: str, said: Callable[[Scan], None]) -> IlinkSession | None:
    """Follow one code to its end: the session once confirmed, None when it expired."""
    last: Scan | None = None
    while True:
        answer = await api.qrcode_status(code, timeout=STATUS_HOLD_S)
        try:
            state = Scan(str(answer.get("status", "")))
        except ValueError:
            raise PeerUnavailable(PLATFORM, f"get_qrcode_status: unknown status {str(answer.get('status'))[:20]!r}") from None
        if state is not last:
            said(state)
            last = state
        if state is Scan.EXPIRED:
            return None
        if state is Scan.CONFIRMED:
            token = answer.get("bot_token")
            if not isinstance(token, str) or not token:
                raise PeerUnavailable(PLATFORM, "get_qrcode_status: confirmed without a bot_token")
            register_secret(token, "weixin bot token")
            base = answer.get("baseurl")
            return IlinkSession.model_validate({
                "token": token, "base_url": base if isinstance(base, str) and base else api.base_url,
                "bot_id": str(answer.get("ilink_bot_id") or ""), "user_id": str(answer.get("ilink_user_id") or "")})
