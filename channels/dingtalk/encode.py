"""Rendered parts -> DingTalk's bodies: Markdown through the session webhook or the robot's send API, AI cards.

**Markdown.**  A DingTalk Markdown message has a ``title`` (what the chat list
and the notification show) and a ``text``.  Through the session webhook it is
``{"msgtype": "markdown", "markdown": {title, text}}``; through the robot's
proactive API (``oToMessages/batchSend`` to one learner, ``groupMessages/send``
to a group) it is the ``sampleMarkdown`` template, its parameters a JSON string.

**The reply token.**  The ``sessionWebhook`` of the learner's message and when it
expires ride in the referrer's token (:class:`ReplyToken`).  It is not the
referrer's ``expires_at``: past it the answer still goes, by the proactive API.

**AI cards.**  ``card/instances/createAndDeliver`` puts a card made from the
account's template into the chat under an ``outTrackId`` (derived from the
reply's key, so a restarted process finds the card the killed one opened);
``PUT card/streaming`` replaces the streamed variable's text (``isFull``) and
closes it with ``isFinalize``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

from gateway.core.errors import InvalidEvent

TITLE_CHARS = 20
MARKS = re.compile(r"[#*_`>\[\]()~|-]+")


@dataclass(frozen=True)
class ReplyToken:
    """The learner's message's session webhook and its end (epoch milliseconds)."""

    webhook: str
    expires_ms: int

    def open_at(self, now: float | None = None, *, margin_s: float = 5.0) -> bool:
        """Whether the webhook still takes an answer, with a margin for the time the send takes."""
        return (now if now is not None else time.time()) + margin_s < self.expires_ms / 1000

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, token: str | None) -> ReplyToken | None:
        if not token:
            return None
        try:
            said = json.loads(token)
            return cls(webhook=str(said["webhook"]), expires_ms=int(said["expires_ms"]))
        except (ValueError, KeyError, TypeError):
            return None  # not one of ours (a referrer from before): answer by the proactive API


def title_of(text: str) -> str:
    """The first words of the answer without Markdown marks: what the chat list shows."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    plain = " ".join(MARKS.sub(" ", first).split())
    return (plain[:TITLE_CHARS] + "…") if len(plain) > TITLE_CHARS else (plain or "…")


def webhook_markdown(text: str) -> dict[str, Any]:
    return {"msgtype": "markdown", "markdown": {"title": title_of(text), "text": text}}


def proactive_markdown(robot_code: str, chat: str, *, group: bool, text: str) -> tuple[str, dict[str, Any]]:
    """The path and body of a proactive Markdown message to a learner (by staff id) or a group."""
    body: dict[str, Any] = {"robotCode": robot_code, "msgKey": "sampleMarkdown",
                            "msgParam": json.dumps({"title": title_of(text), "text": text}, ensure_ascii=False)}
    if group:
        return "/v1.0/robot/groupMessages/send", {**body, "openConversationId": chat}
    return "/v1.0/robot/oToMessages/batchSend", {**body, "userIds": [chat]}


def track_id(key: str) -> str:
    """A card's ``outTrackId`` from the reply's stable key: the same reply, the same card."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Card:
    """What an open card needs to be streamed into again."""

    track: str
    key: str

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, handle: str) -> Card:
        try:
            said = json.loads(handle)
            return cls(track=str(said["track"]), key=str(said["key"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidEvent("dingtalk card handle is not one this channel made") from None


def card_create(template: str, card: Card, robot_code: str, chat: str, *, group: bool) -> dict[str, Any]:
    """``createAndDeliver``: the account's template, empty text, into the learner's chat or the group."""
    body: dict[str, Any] = {"cardTemplateId": template, "outTrackId": card.track, "callbackType": "STREAM",
                            "cardData": {"cardParamMap": {card.key: ""}}, "userIdType": 1}
    if group:
        return {**body, "openSpaceId": f"dtv1.card//IM_GROUP.{chat}",
                "imGroupOpenSpaceModel": {"supportForward": True},
                "imGroupOpenDeliverModel": {"robotCode": robot_code}}
    return {**body, "openSpaceId": f"dtv1.card//IM_ROBOT.{chat}",
            "imRobotOpenSpaceModel": {"supportForward": True},
            "imRobotOpenDeliverModel": {"spaceType": "IM_ROBOT", "robotCode": robot_code}}


def card_stream(card: Card, text: str, *, final: bool, guid: str) -> dict[str, Any]:
    """One ``PUT card/streaming``: the whole text so far (``isFull``), finalized on the last."""
    return {"outTrackId": card.track, "guid": guid, "key": card.key, "content": text,
            "isFull": True, "isFinalize": final, "isError": False}
