"""Conversations and pairing in the console, over real HTTP, with learners on the relay platform emulator.

A teacher sees only their partners' conversations; a transcript shows what the learner said and what
was answered; a takeover made in the console is the chat commands' takeover: the teacher's answer
reaches the learner on the platform, the partner stays quiet meanwhile, and handing back sends the
learner the same hand-back phrase ``/handback`` does.  Pairing: approving lets the learner talk
(their held message is answered), denying refuses them.
"""

from __future__ import annotations

import asyncio
import re
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.core.phrases import ENGLISH, Phrase, say
from gateway.store import InboundState
from tests.console.conversation_rig import classroom, ref
from tests.console.rig import csrf_of, signed_in
from tests.contract.harness import eventually


def request_id(page: str) -> str:
    found = re.search(r'name="request" value="([^"]+)"', page)
    assert found, "no request id in the page's forms"
    return found.group(1)


async def test_a_teacher_sees_only_their_partners_conversations_and_a_transcript_of_each(relay_peer, tmp_path: Path, monkeypatch):
    async with classroom(relay_peer, tmp_path / "data", monkeypatch) as room:
        await room.say("ada-kid", "What is a prime number?")
        await room.say("ben-kid", "What is a cell?")
        await room.sees("ada-kid", "Echo: What is a prime number?")
        await room.sees("ben-kid", "Echo: What is a cell?")
        async with aclosing(await signed_in(room.url, "ada")) as ada, aclosing(await signed_in(room.url, "ben")) as ben, \
                aclosing(await signed_in(room.url, "root")) as root:
            listed = (await ada.get("/console/api/conversations")).json()["conversations"]
            assert [(c["partner"], c["learner"], c["channel"], c["state"]) for c in listed] == [
                ("algebra", "ada-kid", "relay", "answered")]
            assert listed[0]["last_text"] == "Echo: What is a prime number?"
            assert [c["partner"] for c in (await ben.get("/console/api/conversations")).json()["conversations"]] == ["biology"]
            assert {c["partner"] for c in (await root.get("/console/api/conversations")).json()["conversations"]} == {
                "algebra", "biology"}
            page = (await ada.get("/console/conversations")).text
            assert f'data-conversation="{ref("ada-kid")}"' in page and ref("ben-kid") not in page

            transcript = (await ada.get(f"/console/api/conversations/{ref('ada-kid')}")).json()
            assert [(line["heard"], line["text"]) for line in transcript["lines"]] == [
                (True, "What is a prime number?"), (False, "Echo: What is a prime number?")]
            shown = await ada.get(f"/console/conversations/{ref('ada-kid')}")
            assert "What is a prime number?" in shown.text and "Echo: What is a prime number?" in shown.text
            assert "script-src 'self'; connect-src 'self'" in shown.headers["content-security-policy"]

            # Ben's learner, under Ada's session: as if it did not exist, on every route.
            csrf = await csrf_of(ada)
            for method, path in [("GET", f"/console/api/conversations/{ref('ben-kid')}"),
                                 ("GET", f"/console/conversations/{ref('ben-kid')}"),
                                 ("POST", f"/console/api/conversations/{ref('ben-kid')}/takeover"),
                                 ("POST", f"/console/api/conversations/{ref('ben-kid')}/reply")]:
                answer = await ada.request(method, path, headers={"x-csrf-token": csrf},
                                           data={"request": "r" * 16, "text": "hi"} if method == "POST" else None)
                assert answer.status_code == 404, (method, path, answer.text)
            assert await room.gateway.store.takeovers() == []
            for bad in ("not-base64!", "", "%00"):
                assert (await ada.get(f"/console/api/conversations/{bad}x")).status_code == 404


async def test_a_takeover_round_trip_from_the_console_reaches_the_learner_on_the_platform(relay_peer, tmp_path: Path, monkeypatch):
    async with classroom(relay_peer, tmp_path / "data", monkeypatch) as room:
        await room.say("ada-kid", "Can you check my homework?")
        await room.sees("ada-kid", "Echo: Can you check my homework?")
        conversation = f"/console/conversations/{ref('ada-kid')}"
        async with aclosing(await signed_in(room.url, "ada")) as ada:
            csrf = await csrf_of(ada)
            # Without the session's CSRF token nothing happens.
            assert (await ada.post(f"{conversation}/takeover")).status_code == 403
            assert (await ada.post(f"/console/api/conversations/{ref('ada-kid')}/takeover", data={"csrf": "forged"})).status_code == 403
            assert await room.gateway.store.takeovers() == []

            taken = await ada.post(f"{conversation}/takeover", data={"csrf": csrf})
            assert taken.status_code == 303 and taken.headers["location"] == f"{conversation}?done=takeover"
            [takeover] = await room.gateway.store.takeovers()
            assert takeover.partner == "algebra" and takeover.target.conversation_key == "relay:main:ada-kid"
            page = (await ada.get(conversation)).text
            assert 'data-state="taken_over"' in page and takeover.code in page

            # The partner is quiet now: what the learner writes goes to the teacher (relayed), not the model.
            await room.say("ada-kid", "Is question 3 right?")
            await eventually(lambda: _heard(room, "Is question 3 right?"), what="the learner's message in the store")
            summary = (await ada.get(f"/console/api/conversations/{ref('ada-kid')}")).json()
            assert summary["conversation"]["state"] == "taken_over" and summary["conversation"]["takeover"] == takeover.code

            answer = "Question 3 is right; look again at question 4."
            form = {"csrf": csrf, "request": request_id(page), "text": answer}
            sent = await ada.post(f"{conversation}/reply", data=form)
            assert sent.status_code == 303
            assert (await ada.post(f"{conversation}/reply", data=form)).status_code == 303  # the same form again
            await room.sees("ada-kid", answer, what="the teacher's console answer on the platform")

            handback = await ada.post(f"{conversation}/handback", data={"csrf": csrf, "request": request_id(page)})
            assert handback.status_code == 303
            notice = say(Phrase.HANDED_BACK, ENGLISH, partner="Algebra")
            seen = await room.sees("ada-kid", notice, what="the hand-back phrase on the platform")
            assert await room.gateway.store.takeovers() == []
            assert seen.count(answer) == 1  # sent twice, answered once
            assert "Echo: Is question 3 right?" not in seen  # the model stayed quiet while the teacher had it
            lines = (await ada.get(f"/console/api/conversations/{ref('ada-kid')}")).json()["lines"]
            authors = {line["text"]: line["author"] for line in lines if not line["heard"]}
            assert authors["Echo: Can you check my homework?"] == "partner"
            assert authors[answer] == "teacher" and authors[notice] == "gateway"  # the transcript says who spoke
            assert '<span class="who">Teacher</span>' in (await ada.get(conversation)).text

            # Handed back, the partner answers again; and answering a conversation not taken over is refused.
            await room.say("ada-kid", "Thanks!")
            await room.sees("ada-kid", "Echo: Thanks!")
            late = await ada.post(f"/console/api/conversations/{ref('ada-kid')}/reply",
                                  data={"csrf": csrf, "request": "late-request-01", "text": "hello?"})
            assert late.status_code == 409
            again = await ada.post(f"/console/api/conversations/{ref('ada-kid')}/takeover", data={"csrf": csrf})
            assert again.status_code == 200 and again.json() == {"done": "takeover"}
            no_id = await ada.post(f"/console/api/conversations/{ref('ada-kid')}/reply", data={"csrf": csrf, "text": "x"})
            assert no_id.status_code == 400


async def _heard(room, text: str) -> bool:
    entries = await room.gateway.store.transcript("relay:main:ada-kid", 50)
    return any(getattr(entry, "message", None) is not None and entry.message.text == text for entry in entries)


async def test_pairing_approve_lets_the_learner_talk_and_deny_refuses_them(relay_peer, tmp_path: Path, monkeypatch):
    async with classroom(relay_peer, tmp_path / "data", monkeypatch, dm="pairing") as room:
        await room.say("ada-kid", "Hello, can we start?")
        await room.say("ben-kid", "Hello from biology")
        await room.say("other-kid", "Me too")

        async def waiting(http) -> list[dict]:
            return (await http.get("/console/api/pairing")).json()["waiting"]

        async with aclosing(await signed_in(room.url, "ada")) as ada, aclosing(await signed_in(room.url, "ben")) as ben:
            listed = await eventually(lambda: _two(waiting(ada)), what="two pairing codes for Ada's partner")
            assert {(w["user"], w["partner"]) for w in listed} == {("ada-kid", "algebra"), ("other-kid", "algebra")}
            [bens] = await waiting(ben)
            assert bens["user"] == "ben-kid" and bens["partner"] == "biology"
            codes = {w["user"]: w["code"] for w in listed}
            assert codes["ada-kid"] in (await ada.get("/console/pairing")).text

            csrf = await csrf_of(ada)
            assert (await ada.post(f"/console/pairing/{codes['ada-kid']}/approve")).status_code == 403  # no CSRF
            assert (await ada.post(f"/console/pairing/{bens['code']}/approve", data={"csrf": csrf})).status_code == 404
            assert [w["user"] for w in await waiting(ben)] == ["ben-kid"]  # Ben's learner untouched

            approved = await ada.post(f"/console/pairing/{codes['ada-kid']}/approve", data={"csrf": csrf})
            assert approved.status_code == 303 and approved.headers["location"] == "/console/pairing?done=approve"
            await room.sees("ada-kid", "Echo: Hello, can we start?", what="the held message answered after approval")
            await room.say("ada-kid", "Next question")
            await room.sees("ada-kid", "Echo: Next question")

            denied = await ada.post(f"/console/api/pairing/{codes['other-kid']}/deny", data={"csrf": csrf})
            assert denied.status_code == 200 and denied.json()["done"] == "deny"
            entries = await room.gateway.store.transcript("relay:main:other-kid", 10)
            assert [(e.message.text, e.state) for e in entries if hasattr(e, "message")] == [("Me too", InboundState.DROPPED)]
            assert not await room.gateway.store.is_approved("relay", "main", "other-kid")
            await asyncio.sleep(0.5)  # an answer that must not come: short, it is this test's own business
            assert not any(text.startswith("Echo:") for text in await room.seen_by("other-kid"))
            again = await ada.post(f"/console/api/pairing/{codes['other-kid']}/approve", data={"csrf": csrf})
            assert again.status_code == 404  # a used code is gone
            assert [w["user"] for w in await waiting(ada)] == []


async def _two(listed) -> list[dict] | None:
    found = await listed
    return found if len(found) == 2 else None


@pytest.mark.parametrize("path", ["/console/api/conversations", "/console/api/pairing"])
async def test_strangers_get_nothing(relay_peer, tmp_path: Path, monkeypatch, path: str):
    from tests.console.rig import client

    async with classroom(relay_peer, tmp_path / "data", monkeypatch) as room, aclosing(client(room.url)) as stranger:
        assert (await stranger.get(path)).status_code == 401


def test_a_transcript_shows_a_reply_as_the_learner_read_it_not_its_markdown():
    from gateway.console.conversations import _line
    from gateway.core.config import PartnerConfig
    from gateway.core.messages import Address, Conversation, ConversationKind, OutboundReply
    from gateway.store import ReplyState
    from gateway.store.transcripts import Said

    target = Address(channel="webchat", account="default", conversation=Conversation(kind=ConversationKind.DIRECT, chat="c1"))
    reply = OutboundReply(idempotency_key="k", target=target, markdown="The answer is **4**, see [page 2](https://example.org/2).")
    line = _line(Said(reply, ReplyState.DELIVERED, 1.0), PartnerConfig(id="algebra", name="Algebra"))
    assert line.text == "The answer is 4, see page 2 (https://example.org/2)."
