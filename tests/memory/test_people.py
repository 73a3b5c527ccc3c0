"""People, not accounts: /link across two channels, memory and history following, /unlink, teacher links."""

from __future__ import annotations

import asyncio
import json
import re

from brain.commands import (
    ALREADY_LINKED,
    BAD_CODE,
    GROUP_ONLY,
    LINKED,
    NOT_LINKED,
    UNLINKED,
)
from brain.memory import direct_history_key
from brain.memory.scopes import Identity
from brain.session_log import CommandRan, UserSaid
from tests.memory.conftest import partner_config
from tests.peers.model_stub import Reply

WEB = {"channel": "webchat", "account": "default"}
TERMINAL = {"channel": "console", "account": "default"}


def code_in(reply: str) -> str:
    return re.search(r"\*\*([A-Z2-9]{8})\*\*", reply).group(1)


def system_of(request: dict) -> str:
    return request["messages"][0]["content"]


async def test_linking_two_channels_makes_memory_and_history_follow_the_learner(rig):
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "Ann's goal: the ember-lark certificate"})), Reply.text("Great goal!"))
    await rig.say("ann-web", "I want the ember-lark certificate.", **WEB)
    await rig.say("ann-term", "hello from the terminal", **TERMINAL)  # a separate person until linked
    before = await rig.say("ann-term", "what is my goal?", **TERMINAL)
    assert "ember-lark" not in json.dumps(before.requests)

    issued = await rig.say("ann-web", "/link", **WEB)
    code = code_in(issued.reply)
    linked = await rig.say("ann-term", f"/link {code.lower()}", **TERMINAL)
    assert linked.reply == LINKED and linked.requests == []  # commands never reach the model

    after = await rig.say("ann-term", "so what is my goal?", **TERMINAL)
    assert "ember-lark certificate" in system_of(after.requests[0])  # memory followed
    said = [m["content"] for m in after.requests[0]["messages"] if m["role"] == "user"]
    assert "I want the ember-lark certificate." in said and "hello from the terminal" in said  # both histories, one log
    assert said[-1] == "so what is my goal?"

    web_key = direct_history_key(rig.data_dir, rig.partner, Identity("webchat", "default", "ann-web"))
    term_key = direct_history_key(rig.data_dir, rig.partner, Identity("console", "default", "ann-term"))
    assert web_key == term_key and web_key.startswith("person:")
    accounts = await rig.controls.accounts((await rig.memory.session(rig.turn("ann-web", "-", **WEB))).person)
    assert {str(a.identity) for a in accounts} == {"webchat:default:ann-web", "console:default:ann-term"}
    # The merged log keeps each turn together, in the order the turns began, and the commands' records.
    entries = await rig.log.read(web_key)
    users = [e.event.text for e in entries if isinstance(e.event, UserSaid)]
    assert users[:3] == ["I want the ember-lark certificate.", "hello from the terminal", "what is my goal?"]
    assert [e.event.command for e in entries if isinstance(e.event, CommandRan)] == ["/link", "/link"]

    # The history search from the terminal finds what was said on the web.
    rig.stub.script(Reply.tool_calls(("history_search", {"query": "ember-lark"})), Reply.text("Found it."))
    searched = await rig.say("ann-term", "search for it", **TERMINAL)
    tool = [m for m in searched.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "I want the ember-lark certificate." in tool["content"]

    again = await rig.say("ann-web", "/link " + code_in((await rig.say("ann-term", "/link", **TERMINAL)).reply), **WEB)
    assert again.reply == ALREADY_LINKED


async def test_unlinking_starts_fresh_and_leaves_the_memory_with_the_person(rig):
    rig.stub.script(Reply.tool_calls(("memory_write", {"text": "likes the tundra-owl stories"})), Reply.text("Noted"))
    await rig.say("ann-web", "I like tundra-owl stories", **WEB)
    code = code_in((await rig.say("ann-web", "/link", **WEB)).reply)
    assert (await rig.say("ann-term", f"/link {code}", **TERMINAL)).reply == LINKED

    assert (await rig.say("ann-term", "/unlink", **TERMINAL)).reply == UNLINKED
    fresh = await rig.say("ann-term", "do you know me?", **TERMINAL)
    assert "tundra-owl" not in json.dumps(fresh.requests)
    still = await rig.say("ann-web", "and me?", **WEB)
    assert "tundra-owl" in system_of(still.requests[0])
    assert (await rig.say("ann-term", "/unlink", **TERMINAL)).reply == NOT_LINKED


async def test_a_code_works_once_for_ten_minutes_only_with_the_teachers_partners_and_only_in_direct_chats(rig):
    code = code_in((await rig.say("ann-web", "/link", **WEB)).reply)
    assert (await rig.say("ann-term", "/link NOPE2345", **TERMINAL)).reply == BAD_CODE
    other_teacher = partner_config(rig.stub, "other", owner="someone-else")
    assert (await rig.say("ann-term", f"/link {code}", partner=other_teacher, **TERMINAL)).reply == BAD_CODE
    rig.clock.advance(601)
    assert (await rig.say("ann-term", f"/link {code}", **TERMINAL)).reply == BAD_CODE

    fresh = code_in((await rig.say("ann-web", "/link", **WEB)).reply)
    assert (await rig.say("ann-term", f"/link {fresh}", **TERMINAL)).reply == LINKED
    assert (await rig.say("bob", f"/link {fresh}", **TERMINAL)).reply == BAD_CODE  # used up
    in_group = await rig.say("ann-web", "/link", group="class", **WEB)
    assert in_group.reply == GROUP_ONLY.format(command="/link") and "**" not in in_group.reply


async def test_the_teacher_links_and_unlinks_and_a_budget_follows_the_person(rig):
    rig.stub.script(Reply.text("hi", usage={"prompt_tokens": 40, "completion_tokens": 2}))
    await rig.say("ann-web", "hello", **WEB)
    rig.stub.script(Reply.text("hi", usage={"prompt_tokens": 30, "completion_tokens": 2}))
    await rig.say("ann-term", "hello", **TERMINAL)
    teacher = "console:teacher"
    linked = await rig.controls.link(teacher, Identity("webchat", "default", "ann-web"), Identity("console", "default", "ann-term"))
    assert linked.merged
    assert (await rig.controls.link(teacher, Identity("webchat", "default", "ann-web"),
                                    Identity("console", "default", "ann-term"))).merged is False
    assert await rig.usage.spent_today("tutor", f"person:{linked.person}") == 74
    unlinked = await rig.controls.unlink(teacher, Identity("console", "default", "ann-term"))
    assert unlinked is not None and unlinked[0] == linked.person


async def test_one_person_writing_from_two_chat_apps_at_once_gets_one_turn_at_a_time(rig):
    await rig.say("ann-term", "hello", **TERMINAL)
    code = code_in((await rig.say("ann-web", "/link", **WEB)).reply)
    assert (await rig.say("ann-term", f"/link {code}", **TERMINAL)).reply == LINKED
    rig.stub.script(Reply.text("web answer " * 10, chunk=3, pause=0.01), Reply.text("terminal answer " * 10, chunk=3, pause=0.01))
    await asyncio.gather(rig.say("ann-web", "from the web", **WEB), rig.say("ann-term", "from the terminal", **TERMINAL))
    key = direct_history_key(rig.data_dir, rig.partner, Identity("webchat", "default", "ann-web"))
    turns = [e.event.turn for e in await rig.log.read(key)]
    runs = [t for i, t in enumerate(turns) if i == 0 or turns[i - 1] != t]
    assert len(runs) == len(set(runs))  # each turn's events together: never interleaved


def test_commands_are_recognised_with_a_bot_suffix_and_only_at_the_start(rig):
    from brain.commands import command_of

    def message(text: str):
        return rig.turn("ann", text).messages[0]

    assert command_of(message("/Link@my_bot ab12cd34")) == ("/link", "ab12cd34")
    assert command_of(message("  /forget confirm")) == ("/forget", "confirm")
    assert command_of(message("please /export")) is None and command_of(message("/stop")) is None
