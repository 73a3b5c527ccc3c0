"""The web chat channel over a real socket: its page, its POST API and its event stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import channels.webchat.api as webchat_api
from channels.base import ChannelContext
from channels.webchat import WebchatChannel, WebchatConfig
from channels.webchat.identity import COOKIE
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind, MessageId, Referrer, RenderedPart
from gateway.http.server import serve_http
from tests.fakes import MemoryCursors, RecordingSink
from tests.waits import HANG_S, HTTP_S, tries

PREFIX = "/channels/webchat/default"
SESSION = "session-one-of-the-test-learner-0001"
"""The credential the page's cookie carries (22-100 characters; the gateway's own are random)."""




@dataclass
class Served:
    url: str
    channel: WebchatChannel
    sink: RecordingSink
    http: httpx.AsyncClient
    learner: str
    """The learner id the gateway derives from SESSION: the chat and sender it sees."""


@asynccontextmanager
async def serve_webchat(tmp_path: Path, **settings: object) -> AsyncIterator[Served]:
    sink = RecordingSink()
    config = WebchatConfig(**settings)  # type: ignore[arg-type]
    channel = WebchatChannel(ChannelContext(AccountId("default"), config, sink, MemoryCursors(), tmp_path))
    app = Starlette(routes=[Mount(PREFIX, routes=channel.http_routes())])
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(app, "127.0.0.1", 0, on_ready=ready.set_result, shutdown_timeout=1.0))
    url = await asyncio.wait_for(ready, HANG_S)
    try:
        async with httpx.AsyncClient(base_url=url + PREFIX, trust_env=False, timeout=HTTP_S,
                                     cookies={COOKIE: SESSION}) as http:
            yield Served(url, channel, sink, http, channel.learners.learner(SESSION))
    finally:
        await channel.close()
        server.cancel()
        with suppress(asyncio.CancelledError):
            await server


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serve_webchat(tmp_path, title="Maths <Club> & friends", max_text_chars=50) as value:
        yield value


def target(served: Served, chat: str | None = None) -> Address:
    return Address(
        channel=ChannelName("webchat"),
        account=AccountId("default"),
        conversation=Conversation(chat=ChatId(chat or served.learner), kind=ConversationKind.DIRECT),
    )


def part(text: str, final: bool = True) -> RenderedPart:
    return RenderedPart(index=0, text=text, final=final)


def post_body(message_id: str = "m1", text: str = "What is 7 x 8?") -> dict[str, str]:
    return {"message_id": message_id, "text": text}


async def read_events(response: httpx.Response, count: int, *, timeout: float = HANG_S) -> list[dict[str, str]]:
    """Parse SSE frames until ``count`` named events (or comments) arrived."""
    events: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    async with asyncio.timeout(timeout):
        async for line in response.aiter_lines():
            if line == "":
                if "event" in frame or "comment" in frame:
                    events.append(frame)
                    if len(events) == count:
                        return events
                frame = {}
            elif line.startswith(":"):
                frame["comment"] = line[1:].strip()
            else:
                field, _, value = line.partition(":")
                frame[field] = value.removeprefix(" ")
    return events


# --------------------------------------------------------------------------- the page


async def test_page_shows_the_configured_title_escaped(served: Served) -> None:
    page = await served.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<title>Maths &lt;Club&gt; &amp; friends</title>" in page.text
    assert 'data-max-chars="50"' in page.text
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'self' covers scripts
    assert "default-src 'self'" in page.headers["content-security-policy"]
    script = await served.http.get("/static/app.js")
    assert script.status_code == 200
    assert "EventSource" in script.text
    assert (await served.http.get("/static/style.css")).status_code == 200


async def test_a_missing_static_file_is_404(served: Served) -> None:
    assert (await served.http.get("/static/nothing.js")).status_code == 404


# --------------------------------------------------------------------------- posting


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"not json", 400, "the body must be a JSON object {message_id, text}"),
        (b"[1, 2]", 400, "the body must be a JSON object {message_id, text}"),
        (json.dumps({"message_id": "m1"}).encode(), 400, "text: this field is required"),
        (json.dumps({**post_body(), "session": SESSION}).encode(), 400, "session: unknown field (send only message_id and text)"),
        (json.dumps(post_body(message_id="m" * 101)).encode(), 400, "message_id: must be 1-100 characters of letters, digits, '_' or '-'"),
        (json.dumps(post_body(message_id="é")).encode(), 400, "message_id: must be 1-100 characters of letters, digits, '_' or '-'"),
        (json.dumps(post_body(text=" \n\t ")).encode(), 400, "text: the message is empty"),
        (json.dumps({**post_body(), "html": "<b>"}).encode(), 400, "html: unknown field (send only message_id and text)"),
        (json.dumps(post_body(text=7)).encode(), 400, "text: Input should be a valid string"),  # type: ignore[arg-type]
        (json.dumps(post_body(text="x" * 51)).encode(), 413, "text: the message has 51 characters; the limit is 50"),
        (b"x" * (50 * 12 + 1025), 413, "the request body is larger than 1624 bytes"),
    ],
)
async def test_bad_posts_get_a_clear_error_and_nothing_is_accepted(served: Served, body: bytes, status: int, error: str) -> None:
    response = await served.http.post("/api/messages", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json() == {"error": error}
    assert served.sink.calls == 0


async def test_text_at_the_limit_counts_characters_not_bytes(served: Served) -> None:
    response = await served.http.post("/api/messages", json=post_body(text="é" * 25 + "😀" * 25))
    assert response.status_code == 202


async def test_202_comes_only_after_the_sink_accepted(served: Served) -> None:
    served.sink.gate.clear()
    posting = asyncio.create_task(served.http.post("/api/messages", json=post_body(text="What is 7 x 8?")))
    for _ in tries(0.01):
        if served.sink.calls:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert served.sink.calls == 1
    assert not posting.done()  # the message is not durable yet, so the page has no answer yet
    served.sink.gate.set()
    response = await posting
    assert response.status_code == 202
    assert response.json() == {"accepted": True}

    [message] = served.sink.accepted
    assert message.event_id == f"{served.learner}.m1"
    assert message.address == target(served)
    assert message.sender.user == served.learner
    assert SESSION not in message.model_dump_json()  # the credential stays at the HTTP edge
    assert message.sender.display_name == "Web learner"
    assert message.text == "What is 7 x 8?"
    assert message.addressed is True
    assert message.received_at.utcoffset() is not None


async def test_a_retried_post_is_accepted_again_but_stored_once(served: Served) -> None:
    first = await served.http.post("/api/messages", json=post_body(message_id="m-7"))
    again = await served.http.post("/api/messages", json=post_body(message_id="m-7"))
    other = await served.http.post("/api/messages", json=post_body(message_id="m-8", text="and 6 x 7?"))
    assert [first.status_code, again.status_code, other.status_code] == [202, 202, 202]
    assert [m.event_id for m in served.sink.accepted] == [f"{served.learner}.m-7", f"{served.learner}.m-8"]


async def test_a_failing_store_is_503_without_internals_and_the_retry_lands(served: Served) -> None:
    served.sink.failures = 1
    failed = await served.http.post("/api/messages", json=post_body())
    assert failed.status_code == 503
    assert "disk" not in failed.text
    assert failed.headers["retry-after"] == "1"
    retried = await served.http.post("/api/messages", json=post_body())
    assert retried.status_code == 202
    assert len(served.sink.accepted) == 1


# --------------------------------------------------------------------------- the event stream


async def test_stream_carries_typing_send_and_edits_in_order(served: Served) -> None:
    channel = served.channel
    async with served.http.stream("GET", "/api/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        await channel.typing(target(served))
        sent = await channel.send(target(served), part("<p>Let me th</p>"), referrer=Referrer(), idempotency_key="r1:p")
        await channel.edit(target(served), sent.ref, part("<p>Let me think</p>", final=False), referrer=Referrer())
        await channel.edit(target(served), sent.ref, part("<p><strong>56</strong></p>", final=True), referrer=Referrer())
        await channel.send(target(served, "someone-else"), part("<p>not for you</p>"), referrer=Referrer(), idempotency_key="x")
        events = await read_events(response, 4)

    assert sent.message == "r1:p"
    assert [e["event"] for e in events] == ["typing", "message", "message", "message"]
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert json.loads(events[0]["data"]) == {}
    assert [json.loads(e["data"]) for e in events[1:]] == [
        {"id": "r1:p", "html": "<p>Let me th</p>", "final": True},
        {"id": "r1:p", "html": "<p>Let me think</p>", "final": False},
        {"id": "r1:p", "html": "<p><strong>56</strong></p>", "final": True},
    ]


async def test_a_reconnecting_page_gets_only_what_it_missed(served: Served) -> None:
    channel = served.channel
    for n in range(3):
        await channel.send(target(served), part(f"<p>{n}</p>"), referrer=Referrer(), idempotency_key=f"k{n}")
    async with served.http.stream("GET", "/api/events") as response:
        everything = await read_events(response, 3)
    first_id = everything[0]["id"]

    async with served.http.stream("GET", "/api/events", headers={"Last-Event-ID": first_id}) as response:
        await channel.send(target(served), part("<p>3</p>"), referrer=Referrer(), idempotency_key="k3")
        resumed = await read_events(response, 3)
    assert [json.loads(e["data"])["html"] for e in resumed] == ["<p>1</p>", "<p>2</p>", "<p>3</p>"]

    # After a reload the page passes its saved id in the query (EventSource cannot set the header).
    async with served.http.stream("GET", "/api/events", params={"last_event_id": resumed[1]["id"]}) as response:
        reloaded = await read_events(response, 1)
    assert json.loads(reloaded[0]["data"])["html"] == "<p>3</p>"


async def test_an_unknown_or_garbled_last_event_id_replays_the_backlog(served: Served) -> None:
    await served.channel.send(target(served), part("<p>hello</p>"), referrer=Referrer(), idempotency_key="k")
    for last_seen in ("banana", str(served.channel.feeds.last_id + 10**9)):  # garbled; from a clock that ran ahead
        async with served.http.stream("GET", "/api/events", headers={"Last-Event-ID": last_seen}) as response:
            [event] = await read_events(response, 1)
        assert json.loads(event["data"])["html"] == "<p>hello</p>"


async def test_the_backlog_is_bounded(tmp_path: Path) -> None:
    async with serve_webchat(tmp_path, backlog_events=10) as served:
        for n in range(15):
            await served.channel.send(target(served), part(f"<p>{n}</p>"), referrer=Referrer(), idempotency_key=f"k{n}")
        async with served.http.stream("GET", "/api/events") as response:
            events = await read_events(response, 10)
    assert [json.loads(e["data"])["html"] for e in events] == [f"<p>{n}</p>" for n in range(5, 15)]


async def test_stream_sends_keep_alive_comments(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webchat_api, "KEEPALIVE_S", 0.05)
    async with served.http.stream("GET", "/api/events") as response:
        [first, second] = await read_events(response, 2)
    assert first == {"comment": "keep-alive"} and second == {"comment": "keep-alive"}


async def test_a_stream_without_a_well_formed_session_cookie_is_401(served: Served) -> None:
    for cookie in ({}, {COOKIE: "../etc"}, {COOKIE: "short"}):
        served.http.cookies.clear()
        served.http.cookies.update(cookie)
        response = await served.http.get("/api/events")
        assert response.status_code == 401
        assert response.json()["error"].startswith("no web chat session: open the chat page")


async def test_closing_the_channel_ends_open_streams(served: Served) -> None:
    async with served.http.stream("GET", "/api/events") as response:
        await asyncio.sleep(0.05)
        await served.channel.close()
        async with asyncio.timeout(HANG_S):
            rest = [line async for line in response.aiter_lines()]
    assert rest == ["retry: 2000", ""]


async def test_a_disconnected_page_stops_following(served: Served) -> None:
    async with served.http.stream("GET", "/api/events"):
        for _ in tries(0.01):
            if served.channel.feeds.feed(served.learner).followers == 1:
                break
            await asyncio.sleep(0.01)
        assert served.channel.feeds.feed(served.learner).followers == 1
    for _ in tries(0.01):
        if served.channel.feeds.feed(served.learner).followers == 0:
            break
        await asyncio.sleep(0.01)
    assert served.channel.feeds.feed(served.learner).followers == 0


async def test_attachments_with_web_urls_ride_along(served: Served) -> None:
    from gateway.core.messages import Attachment

    with_media = RenderedPart(
        index=0,
        text="<p>Here is the graph</p>",
        attachments=(
            Attachment(kind="image", url="https://example.org/graph.png", name="graph.png"),
            Attachment(kind="file", path="/srv/secret.pdf", name="secret.pdf"),
        ),
    )
    async with served.http.stream("GET", "/api/events") as response:
        await served.channel.send(target(served), with_media, referrer=Referrer(), idempotency_key="a")
        [event] = await read_events(response, 1)
    assert json.loads(event["data"])["attachments"] == [{"kind": "image", "url": "https://example.org/graph.png", "name": "graph.png"}]


async def test_run_reports_running_and_beats(tmp_path: Path) -> None:
    class Beats:
        def __init__(self) -> None:
            self.states: list[object] = []
            self.beats = 0

        def beat(self) -> None:
            self.beats += 1

        def event(self) -> None:
            pass

        def set_state(self, state: object, reason: str = "") -> None:
            self.states.append(state)

    heartbeat = Beats()
    channel = WebchatChannel(ChannelContext(AccountId("default"), WebchatConfig(), RecordingSink(), MemoryCursors(), tmp_path))
    running = asyncio.create_task(channel.run(heartbeat))
    await asyncio.sleep(0.05)
    running.cancel()
    with suppress(asyncio.CancelledError):
        await running
    assert [str(getattr(s, "value", s)) for s in heartbeat.states] == ["running"]
    assert heartbeat.beats == 1


def test_a_plain_account_config_is_read_as_webchat_settings(tmp_path: Path) -> None:
    from gateway.core.config import AccountConfig

    channel = WebchatChannel(ChannelContext(AccountId("default"), AccountConfig(), RecordingSink(), MemoryCursors(), tmp_path))
    assert channel.settings == WebchatConfig()
    assert channel.settings.max_text_chars == 8000


def test_sent_ids_are_the_idempotency_keys(tmp_path: Path) -> None:
    # A retried send reuses its key, so the page replaces its bubble rather than adding a second.
    channel = WebchatChannel(ChannelContext(AccountId("default"), WebchatConfig(), RecordingSink(), MemoryCursors(), tmp_path))

    async def twice() -> list[MessageId]:
        to = Address(channel=ChannelName("webchat"), account=AccountId("default"),
                     conversation=Conversation(chat=ChatId("w0"), kind=ConversationKind.DIRECT))
        sent = [await channel.send(to, part("<p>hi</p>"), referrer=Referrer(), idempotency_key="r9:0") for _ in range(2)]
        return [s.message for s in sent]

    assert asyncio.run(twice()) == ["r9:0", "r9:0"]
