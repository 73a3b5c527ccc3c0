"""The types of the update fields the gateway reads, checked before python-telegram-bot parses the update.

``Update.de_json`` checks no types: an ``update_id`` of ``"one"`` or a chat id
that is an object becomes a message whose ids the gateway stores, routes and
answers, and only the reply fails (``int("{'$gt': 0}")``) -- after a turn was
spent on it.  Telegram itself never sends such an update, but whoever holds the
webhook secret (or a broken proxy) can; checked here, it is an invalid event
like any other unreadable update.  Only the fields decode reads are checked;
everything else Telegram adds passes through untouched.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from gateway.core.errors import InvalidEvent


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Chat(_Shape):
    id: StrictInt
    type: StrictStr


class _User(_Shape):
    id: StrictInt


class _Message(_Shape):
    message_id: StrictInt
    date: StrictInt
    chat: _Chat
    from_: _User | None = Field(default=None, alias="from")
    sender_chat: _Chat | None = None
    text: StrictStr | None = None
    caption: StrictStr | None = None
    message_thread_id: StrictInt | None = None
    reply_to_message: _Message | None = None


class _Update(_Shape):
    update_id: StrictInt
    message: _Message | None = None


def check_shape(raw: dict[str, Any]) -> None:
    """Raise InvalidEvent, naming the first wrong field, when ``raw`` is no update the gateway can read."""
    try:
        _Update.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the update"
        raise InvalidEvent(f"telegram update {str(raw.get('update_id'))[:30]} is malformed: "
                           f"{where}: {first['msg']}") from None
