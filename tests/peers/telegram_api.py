"""An emulated Telegram Bot API: the platform's state and rules, independent of HTTP.

Written from the Bot API documentation (core.telegram.org/bots/api), for the
methods the ``telegram`` channel calls: getMe, getUpdates, setWebhook,
deleteWebhook, getWebhookInfo, sendMessage, sendMessageDraft, editMessageText,
sendChatAction, setMyCommands, getMyCommands, sendPhoto, sendDocument,
sendVoice and getFile.  The HTTP face is ``tests/peers/telegram_server.py``.

The rules a channel's correctness depends on:

- ``update_id`` is the event id.  An update stays queued until *confirmed* by a
  ``getUpdates`` whose ``offset`` is above it; until then every poll hands it
  out again with the same id -- a bot that dies before confirming gets it back.
- A webhook and ``getUpdates`` exclude each other (409).  With a webhook set,
  updates are POSTed in order with ``X-Telegram-Bot-Api-Secret-Token`` and
  stay queued (and are retried) until the bot answers 2xx.
- Text is HTML-parsed (``parse_mode=HTML``) and measured after parsing in
  UTF-16 units against 4,096; bad markup is ``can't parse entities``.
- Editing to the same content is ``message is not modified``.
- A group upgraded to a supergroup gets a new chat id; anything sent to the
  old id is refused with 400 and ``parameters.migrate_to_chat_id`` naming the
  new one, and the upgrade posts the service messages ``migrate_to_chat_id``
  (in the old group) and ``migrate_from_chat_id`` (in the new supergroup).
- No send takes an idempotency key: Telegram has none.  A 504 after posting
  (a lost response) therefore leaves a message the bot cannot know about.
- In a group with privacy mode on, a bot only receives commands, mentions of
  it and replies to its messages; with it off, everything.

Messages are kept as Bot API JSON (``date`` in seconds, ``from.is_bot``), so
python-telegram-bot parses them as it would Telegram's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.peers.faults import Faults
from tests.peers.telegram_html import EntityError, parse_html, utf16_len

TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
GETFILE_LIMIT = 20 * 1024 * 1024
"""The cloud Bot API serves files up to 20 MB through getFile; a local Bot API server has no such limit."""
MAX_POLL_TIMEOUT = 50.0
COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
SEND_METHODS = ("sendMessage", "sendPhoto", "sendDocument", "sendVoice")
MEDIA_FIELD = {"sendPhoto": "photo", "sendDocument": "document", "sendVoice": "voice"}


class ApiError(Exception):
    def __init__(self, code: int, description: str, *, retry_after: float | None = None, migrate_to_chat_id: int | None = None):
        super().__init__(description)
        self.code, self.description, self.retry_after = code, description, retry_after
        self.migrate_to_chat_id = migrate_to_chat_id


@dataclass
class StoredFile:
    file_id: str
    unique_id: str
    size: int
    path: str
    content: bytes | None


@dataclass
class Bot:
    token: str
    user: dict
    privacy: bool = True
    knows_drafts: bool = True
    """False plays an older self-hosted Bot API server without sendMessageDraft (404 method not found)."""
    next_update: int = 1
    updates: list[dict] = field(default_factory=list)
    delivered: dict[int, dict] = field(default_factory=dict)
    """Every update ever queued, by id, so a test can redeliver it."""
    webhook: dict | None = None
    commands: list[dict] = field(default_factory=list)
    actions: Counter = field(default_factory=Counter)
    drafts: list[dict] = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)
    polls: list[int] = field(default_factory=list)
    """The offset of every getUpdates call, in order."""
    downloads: list[str] = field(default_factory=list)
    """The path of every file download served, in order."""
    faults: Faults = field(default_factory=Faults)
    generation: int = 0
    wakeup: asyncio.Event | None = None
    pushing: asyncio.Task | None = None


class TelegramPlatform:
    def __init__(self, *, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.bots: dict[str, Bot] = {}
        self.chats: dict[int, dict] = {}
        self.messages: dict[tuple[int, int], dict] = {}
        self.next_message: dict[int, int] = {}
        self.files: dict[str, StoredFile] = {}
        self.migrated: dict[int, int] = {}
        """Old group id -> the supergroup it was upgraded to."""
        self._ids = itertools.count(7_000_000_001)
        self.webhook_delivery = None  # set by the server: async (bot) -> None

    # ------------------------------------------------------------------ bots and users

    def register(self, token: str, username: str | None = None, privacy: bool = True, knows_drafts: bool = True) -> Bot:
        if token not in self.bots:
            bot_id = next(self._ids)
            name = username or f"partner{bot_id % 100000}_bot"
            user = {"id": bot_id, "is_bot": True, "first_name": name.removesuffix("_bot").title(), "username": name,
                    "can_join_groups": True, "can_read_all_group_messages": not privacy, "supports_inline_queries": False}
            self.bots[token] = Bot(token=token, user=user, privacy=privacy, knows_drafts=knows_drafts)
        return self.bots[token]

    def bot(self, token: str | None) -> Bot:
        if token is None and len(self.bots) == 1:
            return next(iter(self.bots.values()))
        if token not in self.bots:
            raise ApiError(404, f"no bot with that token (registered: {len(self.bots)})")
        return self.bots[token]

    def authorize(self, token: str) -> Bot:
        bot = self.bots.get(token)
        if bot is None:
            raise ApiError(401, "Unauthorized")
        if bot.faults.down:
            raise ApiError(503, "Service Unavailable")
        return bot

    def chat(self, spec: dict) -> dict:
        chat_id = int(spec["id"])
        if chat_id not in self.chats:
            kind = spec.get("type") or ("private" if chat_id > 0 else "supergroup")
            chat: dict[str, Any] = {"id": chat_id, "type": kind}
            if kind == "private":
                chat["first_name"] = spec.get("first_name") or f"Learner {chat_id}"
            else:
                chat["title"] = spec.get("title") or f"Group {-chat_id}"
                if spec.get("is_forum"):
                    chat["is_forum"] = True
            self.chats[chat_id] = chat
        return self.chats[chat_id]

    def _post(self, chat: dict, sender: dict, **content: Any) -> dict:
        number = self.next_message.get(chat["id"], 1)
        self.next_message[chat["id"]] = number + 1
        message = {"message_id": number, "date": int(time.time()), "chat": chat, "from": sender, **content}
        self.messages[(chat["id"], number)] = message
        return message

    def add_file(self, kind: str, *, size: int, content: bytes | None, name: str = "") -> StoredFile:
        unique = hashlib.blake2b(f"{kind}{len(self.files)}{name}".encode(), digest_size=8).hexdigest()
        extension = {"photo": "jpg", "voice": "oga"}.get(kind, (name.rsplit(".", 1)[-1] if "." in name else "bin"))
        stored = StoredFile(file_id=f"{kind}-{unique}", unique_id=unique, size=size,
                            path=f"{kind}s/file_{len(self.files)}.{extension}", content=content)
        self.files[stored.file_id] = stored
        return stored

    def media_json(self, kind: str, stored: StoredFile, *, name: str = "", mime: str = "", source: str = "") -> Any:
        base = {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "file_size": stored.size}
        if kind == "photo":
            return [{**base, "width": 640, "height": 480}]
        if kind == "voice":
            return {**base, "duration": 3, "mime_type": mime or "audio/ogg"}
        return {**base, "file_name": name or source.rsplit("/", 1)[-1] or "file", "mime_type": mime or "application/octet-stream"}

    # ------------------------------------------------------------------ users speak

    def say(self, bot: Bot, body: dict) -> dict:
        """A user says something; returns the update id and message id (queued only if the bot may see it)."""
        chat = self.chat(body["chat"])
        spec = body.get("user") or {"id": chat["id"]}
        sender = {"id": int(spec["id"]), "is_bot": False, "first_name": spec.get("first_name") or f"User{spec['id']}"}
        if spec.get("username"):
            sender["username"] = spec["username"]
        text, entities = str(body.get("text", "")), []
        if body.get("command"):
            command = f"/{body['command']}" + (f"@{body['command_to']}" if body.get("command_to") else "")
            text = f"{command} {text}".rstrip()
            entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(command)})
        elif body.get("mention"):
            handle = f"@{body.get('mention_name') or bot.user['username']}"
            text = f"{handle} {text}"
            entities.append({"type": "mention", "offset": 0, "length": utf16_len(handle)})
        content: dict[str, Any] = {}
        if body.get("thread") is not None:
            content["message_thread_id"] = int(body["thread"])
            content["is_topic_message"] = True
        if body.get("reply_to") is not None:
            quoted = self.messages.get((chat["id"], int(body["reply_to"])))
            if quoted is None:
                raise ApiError(400, "message to reply to not found")
            content["reply_to_message"] = {k: v for k, v in public(quoted).items() if k != "reply_to_message"}
        media = body.get("media")
        if media:
            data = bytes.fromhex(media["hex"]) if media.get("hex") else None
            size = int(media.get("size") or (len(data) if data else 0))
            stored = self.add_file(media["kind"], size=size, content=data, name=media.get("name", ""))
            content[media["kind"]] = self.media_json(media["kind"], stored, name=media.get("name", ""), mime=media.get("mime", ""))
            if text:
                content["caption"] = text
                if entities:
                    content["caption_entities"] = entities
        else:
            content["text"] = text
            if entities:
                content["entities"] = entities
        message = self._post(chat, sender, **content)
        queued = self.sees(bot, message)
        update_id = self._queue(bot, message) if queued else None
        return {"update_id": update_id, "message_id": message["message_id"], "delivered": queued}

    def migrate(self, bot: Bot, body: dict) -> dict:
        """Upgrade a group to a supergroup: a new chat id, the old one refused from now on, service messages posted.

        Telegram gives a supergroup an id of the form -100xxxxxxxxxx; the emulator keeps that shape."""
        old = self.chat({"id": int(body["chat_id"])})
        if old["id"] in self.migrated:
            raise ApiError(400, "Bad Request: the group is already a supergroup")
        new_id = int(f"-100{abs(old['id'])}")
        new = self.chat({"id": new_id, "type": "supergroup", "title": old.get("title")})
        admin = {"id": int(body.get("user_id") or 1), "is_bot": False, "first_name": "Admin"}
        notices = (self._post(old, admin, migrate_to_chat_id=new_id),
                   self._post(new, {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"},
                              sender_chat=old, migrate_from_chat_id=old["id"]))
        if body.get("notify", True):  # False plays a bot that has not polled them yet when it next sends
            for message in notices:
                self._queue(bot, message)  # service messages reach every bot of the group, privacy mode or not
        self.migrated[old["id"]] = new_id
        return {"chat_id": new_id}

    def sees(self, bot: Bot, message: dict) -> bool:
        """Privacy mode: in groups a bot sees commands, mentions of it and replies to it -- nothing else."""
        if message["chat"]["type"] == "private" or not bot.privacy:
            return True
        text = message.get("text") or message.get("caption") or ""
        for entity in message.get("entities") or message.get("caption_entities") or []:
            said = text.encode("utf-16-le")[entity["offset"] * 2: (entity["offset"] + entity["length"]) * 2].decode("utf-16-le")
            if entity["type"] == "bot_command" and ("@" not in said or said.split("@", 1)[1] == bot.user["username"]):
                return True
            if entity["type"] == "mention" and said[1:].lower() == bot.user["username"].lower():
                return True
        quoted = message.get("reply_to_message")
        return bool(quoted and quoted["from"]["id"] == bot.user["id"])

    def _queue(self, bot: Bot, message: dict) -> int:
        update = {"update_id": bot.next_update, "message": message}
        bot.next_update += 1
        bot.delivered[update["update_id"]] = update
        bot.updates.append(update)
        self.wake(bot)
        return update["update_id"]

    def queue_raw(self, bot: Bot, update: dict) -> int:
        """Queue a raw (possibly malformed) update; its ``update_id`` is assigned here."""
        update = {**update, "update_id": bot.next_update}
        bot.next_update += 1
        bot.delivered[update["update_id"]] = update
        bot.updates.append(update)
        self.wake(bot)
        return update["update_id"]

    def redeliver(self, bot: Bot, update_id: int) -> None:
        """Hand an update out once more with its original id (a platform retry)."""
        update = bot.delivered.get(update_id)
        if update is None:
            raise ApiError(404, f"no update {update_id}")
        bot.updates = sorted([*bot.updates, update], key=lambda u: u["update_id"])
        self.wake(bot)

    def wake(self, bot: Bot) -> None:
        if bot.wakeup is not None:
            bot.wakeup.set()
            bot.wakeup = None
        if bot.webhook is not None and self.webhook_delivery is not None and (bot.pushing is None or bot.pushing.done()):
            bot.pushing = asyncio.get_running_loop().create_task(self.webhook_delivery(bot))

    # ------------------------------------------------------------------ inbound methods

    async def get_updates(self, bot: Bot, offset: int, timeout: float, limit: int) -> list[dict]:
        if bot.webhook is not None:
            raise ApiError(
                409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first")
        bot.polls.append(offset)
        if offset:
            bot.updates = [u for u in bot.updates if u["update_id"] >= offset]
        bot.generation += 1
        generation = bot.generation
        if bot.wakeup is not None:
            self.wake(bot)  # an older poll still waiting ends with 409, as on Telegram
        deadline = time.monotonic() + min(max(timeout, 0.0), MAX_POLL_TIMEOUT)
        while not bot.updates:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            if bot.wakeup is None:
                bot.wakeup = asyncio.Event()
            wakeup = bot.wakeup
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wakeup.wait(), remaining)
            if bot.generation != generation:
                raise ApiError(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
            if bot.faults.down:
                raise ApiError(503, "Service Unavailable")
        return bot.updates[: max(1, min(limit or 100, 100))]

    def set_webhook(self, bot: Bot, body: dict) -> bool:
        url = str(body.get("url") or "")
        if not url:
            return self.delete_webhook(bot, body)
        secret = body.get("secret_token")
        if secret is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", str(secret)):
            raise ApiError(400, "Bad Request: secret token contains unallowed characters")
        if body.get("drop_pending_updates"):
            bot.updates.clear()
        bot.webhook = {"url": url, "secret_token": secret, "last_error_message": None, "deliveries": 0, "failures": 0}
        self.wake(bot)
        return True

    def delete_webhook(self, bot: Bot, body: dict) -> bool:
        bot.webhook = None
        if bot.pushing is not None:
            bot.pushing.cancel()
            bot.pushing = None
        if body.get("drop_pending_updates"):
            bot.updates.clear()
        return True

    def webhook_info(self, bot: Bot) -> dict:
        hook = bot.webhook or {}
        info = {"url": hook.get("url", ""), "has_custom_certificate": False, "pending_update_count": len(bot.updates)}
        if hook.get("last_error_message"):
            info["last_error_message"] = hook["last_error_message"]
            info["last_error_date"] = int(time.time())
        return info

    # ------------------------------------------------------------------ outbound methods

    def _message_in(self, body: dict) -> tuple[dict, dict]:
        try:
            chat = self.chats[int(body.get("chat_id"))]
        except (KeyError, TypeError, ValueError):
            raise ApiError(400, "Bad Request: chat not found") from None
        if chat["id"] in self.migrated:
            raise ApiError(400, "Bad Request: group chat was upgraded to a supergroup chat",
                           migrate_to_chat_id=self.migrated[chat["id"]])
        content: dict[str, Any] = {}
        thread = body.get("message_thread_id")
        if thread is not None:
            if chat.get("is_forum"):
                content["message_thread_id"] = int(thread)
                content["is_topic_message"] = True
            elif chat["type"] == "private":
                raise ApiError(400, "Bad Request: message thread not found")
        reply = body.get("reply_parameters")
        if reply:
            quoted = self.messages.get((chat["id"], int(reply.get("message_id", 0))))
            if quoted is None and not reply.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
            if quoted is not None:
                content["reply_to_message"] = {k: v for k, v in public(quoted).items() if k != "reply_to_message"}
        return chat, content

    def _text(self, body: dict, key: str = "text", limit: int = TEXT_LIMIT, required: bool = True) -> dict:
        raw = body.get(key)
        if raw is None or raw == "":
            if required:
                raise ApiError(400, "Bad Request: message text is empty")
            return {}
        raw = str(raw)
        if body.get("parse_mode") == "HTML":
            try:
                text, entities = parse_html(raw)
            except EntityError as error:
                raise ApiError(400, f"Bad Request: {error}") from None
        elif body.get("parse_mode"):
            raise ApiError(400, f"Bad Request: unsupported parse_mode {body['parse_mode']!r} in this emulator")
        else:
            text, entities = raw, []
        if not text.strip() and required:
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > limit:
            raise ApiError(400, "Bad Request: message is too long" if key == "text" else "Bad Request: message caption is too long")
        out: dict[str, Any] = {key: text}
        if entities:
            out["entities" if key == "text" else "caption_entities"] = entities
        return out

    def send(self, bot: Bot, method: str, body: dict) -> dict:
        """One send-class call: faults drawn, validated, posted, recorded."""
        attempt = {"at": time.time(), "method": method, "chat_id": body.get("chat_id")}
        bot.attempts.append(attempt)
        fault = bot.faults.draw(self.rng)
        early = {"429": (429, "rate_limited"), "503": (503, "unavailable"), "401": (401, "unauthorized"), "400": (400, "bad_request")}
        if fault in early:
            code, attempt["outcome"] = early[fault]
            if code == 429:
                after = bot.faults.retry_after
                raise ApiError(429, f"Too Many Requests: retry after {after:g}", retry_after=after)
            raise ApiError(code, {401: "Unauthorized", 503: "Service Unavailable", 400: "Bad Request: wrong parameters"}[code])
        try:
            chat, content = self._message_in(body)
            if method == "sendMessage":
                content.update(self._text(body))
                source = None
            else:
                content.update(self._text(body, "caption", CAPTION_LIMIT, required=False))
                kind = MEDIA_FIELD[method]
                source = body.get(kind)
                if not source:
                    raise ApiError(400, f"Bad Request: there is no {kind} in the request")
                content[kind] = self._outbound_media(kind, source)
        except ApiError:
            attempt["outcome"] = "bad_request"
            raise
        message = self._post(chat, bot.user, **content)
        message["_shown"] = {"html": body.get("text") or body.get("caption") or "", "edits": 0,
                             "parse_mode": body.get("parse_mode"), "attachment": source if isinstance(source, str) else
                             (source or {}).get("filename") if source else None}
        attempt["outcome"] = "posted"
        attempt["message_id"] = message["message_id"]
        if fault == "504":
            attempt["outcome"] = "posted+lost_response"
            raise ApiError(504, "Gateway Timeout")
        return public(message)

    def _outbound_media(self, kind: str, source: Any) -> Any:
        if isinstance(source, dict):  # an upload: {"filename", "content"}
            stored = self.add_file(kind, size=len(source["content"]), content=source["content"], name=source["filename"])
            return self.media_json(kind, stored, name=source["filename"], mime=source.get("content_type", ""))
        if str(source) in self.files:
            stored = self.files[str(source)]
        else:  # a URL: Telegram would fetch it; the emulator records it and fetches nothing
            stored = self.add_file(kind, size=1, content=None, name=str(source))
        return self.media_json(kind, stored, source=str(source))

    def send_draft(self, bot: Bot, body: dict) -> bool:
        if not bot.knows_drafts:
            raise ApiError(404, "Not Found: method not found")
        chat, content = self._message_in(body)
        if chat["type"] != "private":
            raise ApiError(400, "Bad Request: drafts can be sent only to private chats")
        draft_id = int(body.get("draft_id") or 0)
        if not draft_id:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        shown = self._text(body, required=False) if body.get("text") else {"text": "Thinking..."}
        bot.drafts.append({"chat_id": chat["id"], "draft_id": draft_id, "text": shown["text"], "at": time.time()})
        return True

    def edit_text(self, bot: Bot, body: dict) -> dict:
        try:
            message = self.messages[(int(body.get("chat_id")), int(body.get("message_id")))]
        except (KeyError, TypeError, ValueError):
            raise ApiError(400, "Bad Request: message to edit not found") from None
        if message["from"]["id"] != bot.user["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        if "text" not in message:
            raise ApiError(400, "Bad Request: there is no text in the message to edit")
        new = self._text(body)
        if new.get("text") == message.get("text") and new.get("entities") == message.get("entities"):
            raise ApiError(400, "Bad Request: message is not modified: specified new message content and reply markup "
                                "are exactly the same as a current content and reply markup of the message")
        message.pop("entities", None)
        message.update(new)
        message["edit_date"] = int(time.time())
        message["_shown"].update(html=str(body.get("text")), parse_mode=body.get("parse_mode"))
        message["_shown"]["edits"] += 1
        return public(message)

    def set_commands(self, bot: Bot, body: dict) -> bool:
        commands = body.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise ApiError(400, "Bad Request: commands must be a list of at most 100 BotCommand")
        for command in commands:
            if not COMMAND_RE.match(str(command.get("command", ""))) or not 1 <= len(str(command.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        bot.commands = [{"command": c["command"], "description": c["description"]} for c in commands]
        return True

    def get_file(self, body: dict) -> dict:
        stored = self.files.get(str(body.get("file_id")))
        if stored is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if stored.size > GETFILE_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "file_size": stored.size, "file_path": stored.path}

    def file_content(self, path: str) -> bytes:
        for stored in self.files.values():
            if stored.path == path:
                return stored.content if stored.content is not None else b"\0" * stored.size
        raise ApiError(404, "Not Found")

    # ------------------------------------------------------------------ what users see

    def seen(self, bot: Bot) -> dict[str, list[dict]]:
        """The bot's messages per chat, as the chat's members see them now (after edits)."""
        chats: dict[str, list[dict]] = {}
        for (chat_id, _), message in sorted(self.messages.items()):
            if message["from"]["id"] != bot.user["id"]:
                continue
            shown = message["_shown"]
            quoted = message.get("reply_to_message")
            chats.setdefault(str(chat_id), []).append({
                "message_id": message["message_id"], "text": message.get("text") or message.get("caption") or "",
                "html": shown["html"], "parse_mode": shown["parse_mode"], "edits": shown["edits"],
                "thread": message.get("message_thread_id"), "reply_to": quoted["message_id"] if quoted else None,
                "attachment": shown["attachment"], "kind": next((k for k in ("photo", "document", "voice") if k in message), "text"),
            })
        return chats


def public(message: dict) -> dict:
    """A message as the Bot API returns it (without the emulator's own bookkeeping)."""
    return {k: v for k, v in message.items() if not k.startswith("_")}
