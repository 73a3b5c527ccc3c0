"""The state of an emulated Slack: apps in workspaces, channels, messages, streams, files, limits and faults.

Written from Slack's documentation of the Web API, Socket Mode and the
Events API; no Slack code.  What it keeps per app (one app installed in one
workspace, reached by its bot token ``xoxb-`` and its app-level token
``xapp-``):

- messages as users see them, per channel, each with its ``ts`` and
  ``thread_ts``; a message being streamed (chat.startStream) stays in the
  streaming state until chat.stopStream, and only then may chat.update touch
  it (``message_not_in_streaming_state`` / ``streaming_state_conflict``
  otherwise -- error names chosen here, where the documentation found names none);
- events the app has not acknowledged yet: a Socket Mode envelope stays
  pending until the app acks its ``envelope_id`` and is redelivered with
  ``retry_attempt + 1``; an Events API callback is retried on a non-2xx
  answer or a timeout with ``X-Slack-Retry-Num`` (the server module does the
  sending);
- the rate-limit tiers (Tier 1: 1+/min, 2: 20+/min, 3: 50+/min, 4: 100+/min per
  method; chat.postMessage about one per second per channel), enforced when a
  test turns them on: an excess call gets HTTP 429 with ``Retry-After``;
- each user's locale (``users.info`` with ``include_locale=true`` answers ``user.locale``; Slack's
  default ``en-US`` for a user the test gave none), and a users.info that fails or is slow when a
  test says so;
- faults a test sets for the next calls (HTTP 429/401/400/503, 504 after
  posting, or any Slack error string in a 200 body) and an outage.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from tests.peers.faults import Faults

SEND_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.startStream", "files.completeUploadExternal"})
"""The calls a fault set for "the next send" applies to."""
TIERS: dict[str, int] = {
    "apps.connections.open": 1, "auth.test": 4, "conversations.info": 3, "chat.update": 3,
    "chat.startStream": 4, "chat.appendStream": 4, "chat.stopStream": 4,
    "assistant.threads.setStatus": 4, "assistant.threads.setSuggestedPrompts": 4,
    "files.getUploadURLExternal": 4, "files.completeUploadExternal": 4, "users.info": 4,
}
PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
POST_BURST = 3
"""chat.postMessage: one per second per channel, with a short burst allowed."""


class ApiError(Exception):
    """A Web API failure: Slack's error string, in a 200 body unless ``status`` says otherwise."""

    def __init__(self, error: str, status: int = 200, retry_after: float | None = None) -> None:
        super().__init__(error)
        self.error, self.status, self.retry_after = error, status, retry_after


BOT_SCOPES = ("app_mentions:read", "assistant:write", "channels:history", "chat:write", "files:read", "files:write",
              "groups:history", "im:history", "im:read", "im:write", "mpim:history", "users:read")
"""What the guide's manifest grants; Slack names a token's scopes in every answer's ``x-oauth-scopes``."""

FAULTS: dict[str, ApiError] = {
    "429": ApiError("ratelimited", 429), "503": ApiError("service_unavailable", 503),
    "401": ApiError("invalid_auth", 401), "400": ApiError("invalid_arguments", 400),
}


@dataclass
class App:
    bot_token: str
    app_token: str
    signing_secret: str
    team: str
    app_id: str
    bot_user: str
    bot_id: str
    request_url: str | None = None
    streaming: bool = True
    enforce_limits: bool = False
    faults: Faults = field(default_factory=Faults)
    messages: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    events: dict[str, dict] = field(default_factory=dict)
    """event_id -> the event_callback body, for redelivery."""
    pending: dict[str, dict] = field(default_factory=dict)
    """envelope_id -> a Socket Mode envelope not acknowledged yet."""
    sockets: list[Any] = field(default_factory=list)
    connections_opened: int = 0
    deliveries: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    statuses: list[dict] = field(default_factory=list)
    prompts: list[dict] = field(default_factory=list)
    uploads: dict[str, dict] = field(default_factory=dict)
    windows: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    buckets: dict[str, list[float]] = field(default_factory=dict)
    scopes: tuple[str, ...] = BOT_SCOPES
    locales: dict[str, str] = field(default_factory=dict)
    """user id -> the locale Slack shows for them (users.info, include_locale)."""
    users_info_error: str | None = None
    """A Slack error string users.info answers with (``missing_scope``), when set."""
    users_info_latency: float = 0.0


class SlackPlatform:
    def __init__(self, seed: int = 0) -> None:
        self.apps: dict[str, App] = {}
        self.by_app_token: dict[str, App] = {}
        self.rng = random.Random(seed)
        self.files: dict[str, dict] = {}
        self.base = ""
        """The server's own address, for the file URLs it hands out."""
        self._ids = itertools.count(1)
        self._clock = time.time()

    # ------------------------------------------------------------------ ids

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08X}"

    def ts(self) -> str:
        """Message timestamps are unique per channel and increase: seconds.microseconds."""
        self._clock = max(time.time(), self._clock + 0.000001)
        return f"{self._clock:.6f}"

    # ------------------------------------------------------------------ apps

    def register(self, body: dict) -> App:
        app = App(bot_token=body["bot_token"], app_token=body["app_token"], signing_secret=body.get("signing_secret", ""),
                  team=body.get("team") or self._id("T"), app_id=self._id("A"), bot_user=self._id("U"),
                  bot_id=self._id("B"), request_url=body.get("request_url"), streaming=bool(body.get("streaming", True)),
                  scopes=tuple(body.get("scopes", BOT_SCOPES)))
        self.apps[app.bot_token] = app
        self.by_app_token[app.app_token] = app
        return app

    def app(self, token: str | None) -> App:
        if token in self.apps:
            return self.apps[token]  # type: ignore[index]
        if token in self.by_app_token:
            return self.by_app_token[token]  # type: ignore[index]
        raise ApiError("invalid_auth")

    # ------------------------------------------------------------------ limits and faults

    def admit(self, app: App, method: str, params: dict) -> bool:
        """Raise the fault or the rate limit this call meets, if any; True when the call is to be posted
        and its answer lost (a 504 after the fact)."""
        if app.faults.down:
            raise ApiError("service_unavailable", 503)
        outcome = app.faults.draw(self.rng) if method in SEND_METHODS else None
        if outcome is not None and outcome != "504":
            known = FAULTS.get(outcome) or ApiError(outcome)
            raise ApiError(known.error, known.status, app.faults.retry_after if known.status == 429 else None)
        if app.enforce_limits:
            self._limit(app, method, params)
        return outcome == "504"

    def _limit(self, app: App, method: str, params: dict) -> None:
        now = time.monotonic()
        if method == "chat.postMessage":
            key = f"post:{params.get('channel')}"
            tokens, last = app.buckets.get(key, [POST_BURST, now])
            tokens = min(POST_BURST, tokens + (now - last))
            if tokens < 1:
                app.buckets[key] = [tokens, now]
                raise ApiError("ratelimited", 429, retry_after=max(1, round(1 - tokens)))
            app.buckets[key] = [tokens - 1, now]
            return
        window = app.windows[method]
        while window and now - window[0] >= 60:
            window.popleft()
        if len(window) >= PER_MINUTE[TIERS.get(method, 4)]:
            raise ApiError("ratelimited", 429, retry_after=max(1, int(60 - (now - window[0])) + 1))
        window.append(now)

    # ------------------------------------------------------------------ what users say

    def event_body(self, app: App, event: dict) -> dict:
        event_id = self._id("Ev")
        body = {"token": "verification-token-unused", "team_id": app.team, "api_app_id": app.app_id, "event": event,
                "type": "event_callback", "event_id": event_id, "event_time": int(time.time()),
                "authorizations": [{"team_id": app.team, "user_id": app.bot_user, "is_bot": True}]}
        app.events[event_id] = body
        return body

    def say(self, app: App, body: dict) -> list[dict]:
        """A user's message: the ``message`` event, and ``app_mention`` too when it mentions the bot in a channel."""
        channel, user = body["channel"], body.get("user") or self._id("U")
        text = body.get("text", "")
        if body.get("mention"):
            text = f"<@{app.bot_user}> {text}"
        direct = channel.startswith("D")
        event: dict[str, Any] = {"type": "message", "channel": channel, "user": user, "text": text, "ts": self.ts(),
                                 "team": app.team, "channel_type": "im" if direct else "channel"}
        event["event_ts"] = event["ts"]
        if body.get("thread_ts"):
            event["thread_ts"] = body["thread_ts"]
        if body.get("files"):
            event["subtype"] = "file_share"
            event["files"] = [self.add_file(app, f) for f in body["files"]]
        events = [event]
        if not direct and f"<@{app.bot_user}>" in text:
            mention = {k: v for k, v in event.items() if k not in ("channel_type", "subtype")}
            events.append({**mention, "type": "app_mention"})
        return [self.event_body(app, e) for e in events]

    def add_file(self, app: App, spec: dict) -> dict:
        file_id = self._id("F")
        content = bytes.fromhex(spec.get("hex", "")) if spec.get("hex") else b"x" * int(spec.get("size", 16))
        name = spec.get("name", "file.bin")
        self.files[file_id] = {"content": content, "team": app.team}
        return {"id": file_id, "name": name, "mimetype": spec.get("mimetype", "application/octet-stream"),
                "size": len(content), "url_private": f"{self.base}/files-pri/{app.team}-{file_id}/{name}",
                "url_private_download": f"{self.base}/files-pri/{app.team}-{file_id}/download/{name}"}

    # ------------------------------------------------------------------ what the bot does

    def post(self, app: App, params: dict, **extra: Any) -> dict:
        channel = params.get("channel") or params.get("channel_id")
        if not channel:
            raise ApiError("channel_not_found")
        message = {"type": "message", "channel": channel, "ts": self.ts(), "user": app.bot_user, "bot_id": app.bot_id,
                   "text": params.get("text") or params.get("markdown_text") or "", "thread_ts": params.get("thread_ts"),
                   "blocks": params.get("blocks") or [], "files": [], "streaming": False, "edits": 0, **extra}
        app.messages[channel].append(message)
        return message

    def find(self, app: App, channel: str, ts: str) -> dict:
        for message in app.messages.get(channel, []):
            if message["ts"] == ts:
                return message
        raise ApiError("message_not_found")

    def update(self, app: App, params: dict) -> dict:
        message = self.find(app, str(params.get("channel")), str(params.get("ts")))
        if message["streaming"]:
            raise ApiError("streaming_state_conflict")
        message["text"] = params.get("text", message["text"])
        message["edits"] += 1
        return message

    def start_stream(self, app: App, params: dict) -> dict:
        if not app.streaming:
            raise ApiError("unknown_method")
        if not params.get("thread_ts"):
            raise ApiError("invalid_arguments")
        channel = str(params.get("channel"))
        if not channel.startswith("D") and not (params.get("recipient_user_id") and params.get("recipient_team_id")):
            raise ApiError("missing_recipient_user_id")
        return self.post(app, params, streaming=True, chunks=[params.get("markdown_text") or ""])

    def append_stream(self, app: App, params: dict) -> dict:
        message = self.find(app, str(params.get("channel")), str(params.get("ts")))
        if not message["streaming"]:
            raise ApiError("message_not_in_streaming_state")
        delta = params.get("markdown_text") or ""
        message["chunks"].append(delta)
        message["text"] += delta
        return message

    def stop_stream(self, app: App, params: dict) -> dict:
        message = self.find(app, str(params.get("channel")), str(params.get("ts")))
        if not message["streaming"]:
            raise ApiError("message_not_in_streaming_state")
        if params.get("markdown_text"):
            message["text"] += params["markdown_text"]
        message["streaming"] = False
        return message

    def upload_ticket(self, app: App, params: dict, base: str) -> dict:
        if not params.get("filename") or not str(params.get("length", "")).isdigit():
            raise ApiError("invalid_arguments")
        file_id = self._id("F")
        app.uploads[file_id] = {"name": params["filename"], "length": int(params["length"]), "content": None}
        return {"upload_url": f"{base}/upload/v1/{file_id}", "file_id": file_id}

    def complete_upload(self, app: App, params: dict) -> dict:
        import json

        files = params.get("files")
        files = json.loads(files) if isinstance(files, str) else files
        shared = []
        for spec in files or []:
            upload = app.uploads.get(spec.get("id"))
            if upload is None or upload["content"] is None:
                raise ApiError("file_not_found")
            shared.append({"id": spec["id"], "name": upload["name"], "title": spec.get("title") or upload["name"],
                           "size": len(upload["content"])})
        if params.get("channel_id"):
            self.post(app, {"channel": params["channel_id"], "thread_ts": params.get("thread_ts")}, files=shared)
        return {"files": shared}

    def user_info(self, app: App, params: dict) -> dict:
        """users.info: the user, with ``locale`` only when ``include_locale`` is true (Slack's opt-in)."""
        if app.users_info_error:
            raise ApiError(app.users_info_error)
        if "users:read" not in app.scopes:
            raise ApiError("missing_scope")
        user = str(params.get("user") or "")
        if not user.startswith(("U", "W")):
            raise ApiError("user_not_found")
        info: dict[str, Any] = {"id": user, "team_id": app.team, "name": user.lower(), "deleted": False,
                                "real_name": f"Learner {user}", "tz": "Asia/Shanghai", "is_bot": user == app.bot_user,
                                "profile": {"display_name": f"Learner {user}", "real_name": f"Learner {user}"}}
        if str(params.get("include_locale", "")).lower() in ("1", "true"):
            info["locale"] = app.locales.get(user, "en-US")
        return {"user": info}

    def seen(self, app: App) -> dict[str, list[dict]]:
        return {channel: list(messages) for channel, messages in app.messages.items()}
